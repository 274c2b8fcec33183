package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel"
)

// The credentials the URLs below carry, in the path, the query and the
// userinfo, as MCP providers hand them out.
const (
	pathKey  = "pk7Hq2xZ9mW4vB8nR3tY6uK1"
	queryKey = "qk5Lp8sD2fG7hJ4kZ9xC3vB6"
	userKey  = "uk3Nm6Qw9Er2Ty5Ui8Op1As4"
)

var urlSecrets = []string{pathKey, queryKey, userKey}

// keyed returns origin's URL with a key in its path, its query and its
// userinfo.
func keyed(origin string) string {
	scheme, host, _ := strings.Cut(origin, "://")
	return scheme + "://runnel:" + userKey + "@" + host + "/mcp/" + pathKey + "/sse?api_key=" + queryKey + "&profile=default"
}

// logRecorder keeps every log record as text.
type logRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (l *logRecorder) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func (l *logRecorder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(p))
	return len(p), nil
}

func (l *logRecorder) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "")
}

// TestURLSecretsNeverShown connects to servers whose URL carries its
// credentials, every way a connection or a call can fail, and checks that
// no notice, error, result or log line shows them.
func TestURLSecretsNeverShown(t *testing.T) {
	var shown []string // everything the package produced
	check := func(t *testing.T, what, s string) {
		t.Helper()
		shown = append(shown, s)
		if l := leaked(s, urlSecrets...); len(l) > 0 {
			t.Errorf("%s shows %q: %s", what, l, s)
		}
	}
	var logs logRecorder
	opts := allowLoopback()
	opts.Logger = logs.logger()

	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "broken", http.StatusInternalServerError)
	}))
	defer failing.Close()
	notFound := httptest.NewServer(http.NotFoundHandler())
	defer notFound.Close()

	t.Run("connect failures", func(t *testing.T) {
		resolver := &fakeResolver{answers: map[string][]string{"loop.test": {"127.0.0.1"}}}
		guarded := *opts
		guarded.Guard.Resolver = resolver
		specs := []ServerSpec{
			httpSpec("unreachable", keyed("http://"+closedPort(t))),
			httpSpec("failing", keyed(failing.URL)),
			httpSpec("notfound", keyed(notFound.URL)),
			httpSpec("refused", keyed("https://loop.test")),
		}
		pool := Connect(t.Context(), specs, &guarded)
		if err := pool.Close(); err != nil {
			check(t, "Close", err.Error())
		}
		want := []string{
			`MCP server "unreachable" is unavailable for this run: could not connect to http://` + strings.TrimPrefix(keyedOrigin(specs[0].URL), "http://"),
			`MCP server "failing" is unavailable for this run: ` + failing.URL + ` answered HTTP 500 Internal Server Error.`,
			`MCP server "notfound" is unavailable for this run: streamable HTTP answered HTTP 404 and the SSE transport failed too: ` + notFound.URL + ` answered HTTP 404 Not Found.`,
			`MCP server "refused" is unavailable for this run: https://loop.test resolves to 127.0.0.1, a loopback address; runnel only connects to public addresses unless the host is in RUNNEL_MCP_HOST_ALLOWLIST.`,
		}
		got := pool.Notices()
		if len(got) != len(want) {
			t.Fatalf("notices: %q", got)
		}
		for i, n := range got {
			check(t, "a notice", n)
			if !strings.HasPrefix(n, want[i]) {
				t.Errorf("notice %d = %q\nwant it to start %q", i, n, want[i])
			}
		}
	})

	t.Run("plan-time refusals", func(t *testing.T) {
		for _, u := range []string{keyed("https://10.0.0.5"), keyed("http://mcp.example.com"), keyed("ftp://mcp.example.com")} {
			_, err := Normalize([]runnel.McpServer{{Name: "m", URL: u}}, GuardOptions{})
			if err == nil {
				t.Fatalf("Normalize(%s) passed", u)
			}
			check(t, "a Normalize error", err.Error())
		}
	})

	for _, sse := range []bool{false, true} {
		t.Run(fmt.Sprintf("failing calls, sse %t", sse), func(t *testing.T) {
			h := newHostile(t, hostileOptions{sse: sse, path: "/mcp/" + pathKey + "/sse"}, func(_ *hostile, w http.ResponseWriter, r *http.Request, call hostileCall) bool {
				switch call.Params.Name {
				case "drop": // the connection dies under the POST: the HTTP client's error names the URL
					conn, _, err := http.NewResponseController(w).Hijack()
					if err == nil {
						conn.Close()
					}
					return true
				case "huge": // a server that quotes its own URL in an error
					w.Header().Set("Content-Type", "application/json")
					fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32000,"message":"no quota left for %s"}}`, call.ID, r.URL.RequestURI())
					return !sse
				}
				return false
			})
			spec := httpSpec("h", keyed(strings.TrimSuffix(h.url, "/mcp/"+pathKey+"/sse")))
			if sse {
				spec.Transport = TransportSSE
			}
			pool := Connect(t.Context(), []ServerSpec{spec}, opts)
			defer pool.Close()
			if n := pool.Notices(); len(n) != 0 {
				t.Fatalf("notices: %q", n)
			}
			call := func(tool, args string) {
				t.Helper()
				res, err := pool.Call(t.Context(), "mcp__h__"+tool, json.RawMessage(args))
				if err != nil {
					check(t, tool+"'s error", err.Error())
				}
				check(t, tool+"'s result", res.Content)
			}
			call("huge", `{}`)
			call("fail", `{}`)
			// A server that quotes its own URL in a result.
			call("echo", `{"text":"my URL is `+spec.URL+`"}`)
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			if _, err := pool.Call(ctx, "mcp__h__echo", nil); err != nil {
				check(t, "a cancelled call's error", err.Error())
			}
			// Last: on the SSE transport a failed POST ends the session.
			call("drop", `{}`)
			call("echo", `{"text":"after the drop"}`)
		})
	}

	check(t, "the log", logs.text())
	if len(strings.Join(shown, "")) == 0 {
		t.Error("nothing was produced; the checks prove nothing")
	}
}

// keyedOrigin is the origin of a keyed URL, as messages show it.
func keyedOrigin(raw string) string {
	scheme, rest, _ := strings.Cut(raw, "://")
	_, hostPath, _ := strings.Cut(rest, "@")
	host, _, _ := strings.Cut(hostPath, "/")
	return scheme + "://" + host
}

func TestSecretURLParts(t *testing.T) {
	tests := []struct {
		url  string
		want []string
	}{
		{"https://mcp.example.com/mcp", nil},
		{"https://mcp.example.com/mcp/" + pathKey + "/sse", []string{pathKey}},
		{"https://mcp.example.com/sse?api_key=" + queryKey + "&profile=default&limit=10", []string{queryKey}},
		// A value named like a credential is secret even when short; one
		// that is neither named like one nor shaped like one is not.
		{"https://mcp.example.com/mcp?token=abcdefgh&region=eu-west-1", []string{"abcdefgh"}},
		{"https://user:" + userKey + "@mcp.example.com/mcp", []string{userKey}},
		{"https://" + userKey + "@mcp.example.com/mcp", []string{userKey}},
		// Percent-encoded pieces come both ways, longest first.
		{"https://mcp.example.com/s/ab%2Bcd%2Fef0123456789gh/mcp", []string{"ab%2Bcd%2Fef0123456789gh", "ab+cd/ef0123456789gh"}},
		// A long slug is treated as a key: over-redacting a slug is cheap.
		{"https://mcp.example.com/servers/github-enterprise-integration-server/mcp", []string{"github-enterprise-integration-server"}},
		{"https://mcp.example.com/v1/2025-06-18/mcp", nil},
		{"https://mcp.example.com/mcp#access_token=" + queryKey, []string{queryKey}},
		{"not a url\x00", nil},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, SecretURLParts(tt.url)); diff != "" {
			t.Errorf("SecretURLParts(%q) (-want +got):\n%s", tt.url, diff)
		}
	}
}

// TestLogScrubbed logs, through the handler the SDK's logger gets, a
// record that quotes a keyed URL every way slog can carry it.
func TestLogScrubbed(t *testing.T) {
	var logs logRecorder
	raw := keyed("https://mcp.example.com")
	s := &server{scrub: newScrubber(raw)}
	log := s.logger(logs.logger()).With("url", raw).WithGroup("g")
	log.Error("Post \""+raw+"\": EOF",
		"err", fmt.Errorf("calling %q: %w", raw, context.Canceled),
		slog.Group("req", "target", raw, "n", 3),
		"any", struct{ URL string }{raw})
	got := logs.text()
	if l := leaked(got, urlSecrets...); len(l) > 0 {
		t.Errorf("the log shows %q:\n%s", l, got)
	}
	if !strings.Contains(got, "https://mcp.example.com") || !strings.Contains(got, "req.n=3") {
		t.Errorf("the log lost more than the secrets:\n%s", got)
	}
}
