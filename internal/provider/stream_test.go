package provider_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel/internal/provider"
)

type event struct{ Name, Data string }

// readEvents reads every event of r.
func readEvents(r io.Reader) ([]event, error) {
	er := provider.NewEventReader(r)
	var got []event
	for er.Next() {
		got = append(got, event{string(er.Name()), string(er.Data())})
	}
	return got, er.Err()
}

func TestEventReader(t *testing.T) {
	long := strings.Repeat("x", 5000) // beyond the reader's 512-byte buffer
	for _, tc := range []struct {
		name, in string
		want     []event
	}{
		{"data only", "data: {\"a\":1}\n\ndata: [DONE]\n\n", []event{{"", `{"a":1}`}, {"", "[DONE]"}}},
		{"named, CRLF", "event: ping\r\ndata: {}\r\n\r\n", []event{{"ping", "{}"}}},
		{"comments and unknown fields", ": keep-alive\nid: 7\nretry: 10\ndata:x\n\n", []event{{"", "x"}}},
		{"data lines joined", "data: a\ndata:  b\ndata\n\n", []event{{"", "a\n b\n"}}},
		{"an event without data is no event", "event: ping\n\nevent: delta\ndata: 1\n\n", []event{{"delta", "1"}}},
		{"empty data is an event", "data:\n\n", []event{{"", ""}}},
		{"a long line", "data: " + long + "\n\ndata: after\n\n", []event{{"", long}, {"", "after"}}},
		{"an unfinished event is dropped", "data: 1\n\ndata: 2\n", []event{{"", "1"}}},
		{"a partial line at the end", "data: 1\n\ndata: 2", []event{{"", "1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readEvents(strings.NewReader(tc.in))
			if err != nil {
				t.Errorf("Err = %v at a clean end", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// cutReader yields its text, then fails the way a cut HTTP body does.
type cutReader struct{ r io.Reader }

func (c cutReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func TestEventReaderCut(t *testing.T) {
	got, err := readEvents(cutReader{strings.NewReader("data: 1\n\ndata: 2\n")})
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("Err = %v, want the read error", err)
	}
	if diff := cmp.Diff([]event{{"", "1"}}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func FuzzEventReader(f *testing.F) {
	f.Add("event: a\ndata: 1\n\n")
	f.Add("data: " + strings.Repeat("y", 3000) + "\r\n\r\n: c\n\n")
	f.Fuzz(func(t *testing.T, in string) {
		got, err := readEvents(strings.NewReader(in))
		if err != nil {
			t.Fatalf("Err = %v reading a string", err)
		}
		// Every event read is one the input holds: a data line of each
		// line of its data ("data" alone is a line of empty data).
		for _, e := range got {
			for line := range strings.SplitSeq(e.Data, "\n") {
				if !strings.Contains(in, "data:"+line) && !strings.Contains(in, "data: "+line) && (line != "" || !strings.Contains(in, "data")) {
					t.Fatalf("event data line %q is not in the input", line)
				}
			}
		}
	})
}

func TestEndpointURL(t *testing.T) {
	for _, tc := range []struct {
		base, path string
		query      url.Values
		want       string
	}{
		{"https://api.openai.com/v1/", "chat/completions", nil, "https://api.openai.com/v1/chat/completions"},
		{"http://127.0.0.1:11434/v1", "responses", nil, "http://127.0.0.1:11434/v1/responses"},
		{"https://api.anthropic.com", "v1/messages", nil, "https://api.anthropic.com/v1/messages"},
		{"https://x.openai.azure.com/openai/deployments/d", "chat/completions", url.Values{"api-version": {"2025-04-01-preview"}},
			"https://x.openai.azure.com/openai/deployments/d/chat/completions?api-version=2025-04-01-preview"},
	} {
		got, err := provider.EndpointURL(tc.base, tc.path, tc.query)
		if err != nil || got != tc.want {
			t.Errorf("EndpointURL(%q, %q) = %q, %v; want %q", tc.base, tc.path, got, err, tc.want)
		}
	}
	for _, base := range []string{"localhost:11434/v1", "/v1", "http://%zz"} {
		if got, err := provider.EndpointURL(base, "x", nil); err == nil {
			t.Errorf("EndpointURL(%q) = %q, want an error", base, got)
		}
	}
}

const secret = "sk-secret-0123456789"

// open posts to srv's /stream through a same-origin client with the
// secret in an api-key header.
func open(t *testing.T, url string) (*http.Response, error) {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	client := provider.SameOriginClient(&http.Client{Transport: tr})
	res, err := provider.OpenStream(t.Context(), client, &provider.StreamRequest{
		API: "test api", URL: url, Header: http.Header{"Api-Key": {secret}}, Body: []byte(`{}`), Secret: secret,
	})
	if err == nil {
		t.Cleanup(func() { res.Body.Close() })
	}
	return res, err
}

func TestOpenStream(t *testing.T) {
	var mu sync.Mutex
	var seen []string // requests as "server path key-present body", in order
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, s)
	}
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		note(fmt.Sprintf("other %s %v", r.URL.Path, r.Header.Get("Api-Key") != ""))
		w.Header().Set("Content-Type", "text/event-stream")
	}))
	t.Cleanup(other.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A redirect must re-send the whole body.
		body, _ := io.ReadAll(r.Body)
		note(fmt.Sprintf("home %s %v %s", r.URL.Path, r.Header.Get("Api-Key") == secret, body))
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q", ct)
		}
		switch r.URL.Path {
		case "/stream":
			w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
			fmt.Fprint(w, "data: ok\n\n")
		case "/moved":
			http.Redirect(w, r, "/stream", http.StatusTemporaryRedirect)
		case "/away":
			http.Redirect(w, r, other.URL+"/stream", http.StatusTemporaryRedirect)
		case "/json":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"choices":[]}`)
		case "/echo":
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, `{"error":{"message":"bad key %s"}}`, secret)
		}
	}))
	t.Cleanup(srv.Close)

	for _, tc := range []struct {
		path    string
		want    string // the error message, "" for a stream
		retry   bool
		visited []string
	}{
		{"/stream", "", false, []string{"home /stream true {}"}},
		{"/moved", "", false, []string{"home /moved true {}", "home /stream true {}"}},
		{"/away", "test api: HTTP 307 Temporary Redirect", false, []string{"home /away true {}"}},
		{"/json", "test api: the server answered with application/json instead of an event stream", false, []string{"home /json true {}"}},
		{"/echo", "test api: HTTP 503: bad key [redacted]", true, []string{"home /echo true {}"}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			mu.Lock()
			seen = nil
			mu.Unlock()
			res, err := open(t, srv.URL+tc.path)
			mu.Lock()
			visited := seen
			mu.Unlock()
			if diff := cmp.Diff(tc.visited, visited); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			if tc.want == "" {
				if err != nil {
					t.Fatalf("OpenStream: %v", err)
				}
				if got, _ := readEvents(res.Body); len(got) != 1 || got[0].Data != "ok" {
					t.Errorf("events %v", got)
				}
				return
			}
			var pe *provider.Error
			if !errors.As(err, &pe) || pe.Message != tc.want || pe.Retryable != tc.retry {
				t.Errorf("OpenStream = %v, want a *provider.Error %q (retryable %v)", err, tc.want, tc.retry)
			}
		})
	}
}

func TestErrorDetail(t *testing.T) {
	for in, want := range map[string]string{
		`{"error":{"type":"invalid_request_error","message":"max_tokens:\n too big"}}`: "max_tokens: too big",
		`{"error":"model not found"}`:               "model not found",
		`{"message":"quota"}`:                       "quota",
		`{"detail":"too large"}`:                    "too large",
		`{"detail":[{"loc":["body"],"msg":"bad"}]}`: `[{"loc":["body"],"msg":"bad"}]`,
		`<html>Bad gateway</html>`:                  "",
		"upstream timed out":                        "upstream timed out",
		"":                                          "",
	} {
		if got := provider.ErrorDetail([]byte(in)); got != want {
			t.Errorf("ErrorDetail(%s) = %q, want %q", in, got, want)
		}
	}
}

// captureTransport keeps the request it was given, reads and closes its
// body as net/http's transport does, and answers with an empty stream.
type captureTransport struct{ req *http.Request }

func (c *captureTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c.req = req
	_, _ = io.Copy(io.Discard, req.Body)
	_ = req.Body.Close()
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: http.NoBody, Request: req}, nil
}

// TestOpenStreamLetsGoOfTheBody: the transport keeps the request for as
// long as the answer streams, which must not keep the conversation too.
func TestOpenStreamLetsGoOfTheBody(t *testing.T) {
	tr := &captureTransport{}
	res, err := provider.OpenStream(t.Context(), &http.Client{Transport: tr}, &provider.StreamRequest{
		API: "test api", URL: "http://model.invalid/x", Body: []byte(`{"messages":[]}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if tr.req.ContentLength != int64(len(`{"messages":[]}`)) {
		t.Errorf("ContentLength %d", tr.req.ContentLength)
	}
	if _, err := tr.req.Body.Read(make([]byte, 1)); err == nil || errors.Is(err, io.EOF) {
		t.Errorf("the sent body can still be read: %v", err)
	}
	if _, err := tr.req.GetBody(); err == nil {
		t.Error("GetBody still rewinds the body after the response arrived")
	}
}
