package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel"
)

const chatHi = `{"id":"chat-1","trigger":"submit-message","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"hi"}]}]}`

// chunks reads an SSE answer into its chunks' JSON, checking the framing:
// data lines and comments only, each event ended by a blank line, and
// [DONE] last.
func chunks(t *testing.T, body []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(body))
	done := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "", strings.HasPrefix(line, ":"):
		case line == "data: [DONE]":
			done = true
		case strings.HasPrefix(line, "data: ") && !done:
			var c map[string]any
			if err := json.Unmarshal([]byte(line[len("data: "):]), &c); err != nil {
				t.Fatalf("chunk %q: %v", line, err)
			}
			out = append(out, c)
		default:
			t.Fatalf("unexpected line %q in\n%s", line, body)
		}
	}
	if !done {
		t.Fatalf("no [DONE] at the end of\n%s", body)
	}
	return out
}

func types(cs []map[string]any) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c["type"].(string))
	}
	return out
}

func TestChatStreamsUIChunks(t *testing.T) {
	var got *runnel.RunRequest
	ts := newTestServer(t, runnerFunc(func(ctx context.Context, req *runnel.RunRequest, sink runnel.Sink) (*runnel.Result, error) {
		got = req
		return helloRunner().Run(ctx, req, sink)
	}), nil)
	resp, body := do(t, ts, http.MethodPost, "/v1/chat", strings.Replace(chatHi, `"id":"chat-1",`, `"id":"chat-1","model":"openai/gpt-5",`, 1),
		"Content-Type", "application/json")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" ||
		resp.Header.Get("X-Vercel-Ai-Ui-Message-Stream") != "v1" {
		t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
	}
	cs := chunks(t, body)
	want := []string{"start", "start-step", "text-start", "text-delta", "text-delta", "text-end", "finish-step", "data-runnel-result", "finish"}
	if diff := cmp.Diff(want, types(cs)); diff != "" {
		t.Errorf("chunk types (-want +got):\n%s", diff)
	}
	if cs[len(cs)-1]["finishReason"] != "stop" {
		t.Errorf("finish %v, want finishReason stop (ai6, the default)", cs[len(cs)-1])
	}
	if got.Model != "openai/gpt-5" || got.SessionID != "chat-1" || len(got.Messages) != 1 || got.Messages[0].Text() != "hi" {
		t.Errorf("the run got %+v", got)
	}
}

// A page on another site can POST to a tokenless runnel on loopback with a
// form or text/plain body (no CORS preflight), and a page whose name is
// re-pointed at 127.0.0.1 is same-origin to the browser. Neither may start
// a run.
func TestChatRefusesRequestsABrowserSendsForAnotherSite(t *testing.T) {
	ran := false
	ts := newTestServer(t, runnerFunc(func(ctx context.Context, req *runnel.RunRequest, sink runnel.Sink) (*runnel.Result, error) {
		ran = true
		return helloRunner().Run(ctx, req, sink)
	}), nil)
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", ""} {
		resp, body := do(t, ts, http.MethodPost, "/v1/chat", chatHi, "Content-Type", ct)
		if resp.StatusCode != http.StatusUnsupportedMediaType || !strings.Contains(string(body), "application/json") {
			t.Errorf("Content-Type %q: %d %s", ct, resp.StatusCode, body)
		}
	}
	for _, host := range []string{"attacker.example", "runnel.internal:8765", "127.0.0.1.nip.io"} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.URL+"/v1/chat", strings.NewReader(chatHi))
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("Host %q: status %d, want 401", host, resp.StatusCode)
		}
	}
	if ran {
		t.Error("a run started")
	}
	// The names of this machine's loopback are served.
	for _, host := range []string{"localhost", "[::1]:1", "127.0.0.2"} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, ts.URL+"/v1/profiles", nil)
		req.Host = host
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("Host %q: status %d, want 200", host, resp.StatusCode)
		}
	}
}

func TestChatProfiles(t *testing.T) {
	var got *runnel.RunRequest
	runner := runnerFunc(func(ctx context.Context, req *runnel.RunRequest, sink runnel.Sink) (*runnel.Result, error) {
		got = req
		return helloRunner().Run(ctx, req, sink)
	})
	profile := func(name, model string, def bool) Profile {
		return Profile{Name: name, Model: model, Default: def, Run: func() (*runnel.RunRequest, error) {
			return &runnel.RunRequest{Model: model, Secrets: map[string]string{"OPENAI_API_KEY": "sk-profile-key"},
				ToolCallback: &runnel.ToolCallback{Endpoint: "https://tools.example/call"}}, nil
		}}
	}
	ts := newTestServer(t, runner, &Options{Profiles: []Profile{profile("fast", "openai/gpt-5-mini", false), profile("main", "openai/gpt-5", true)}})

	_, body := do(t, ts, http.MethodGet, "/v1/profiles", "")
	if strings.Contains(string(body), "sk-profile-key") || !strings.Contains(string(body), `"name":"fast"`) {
		t.Errorf("/v1/profiles: %s", body)
	}
	post := func(body string) []map[string]any {
		got = nil
		resp, b := do(t, ts, http.MethodPost, "/v1/chat", body, "Content-Type", "application/json")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		return chunks(t, b)
	}
	post(chatHi)
	if got == nil || got.Model != "openai/gpt-5" || got.Secrets["OPENAI_API_KEY"] != "sk-profile-key" {
		t.Errorf("no profile named: the run got %+v, want the default profile's", got)
	}
	post(strings.Replace(chatHi, `{"id"`, `{"profile":"fast","id"`, 1))
	if got == nil || got.Model != "openai/gpt-5-mini" {
		t.Errorf("profile fast: the run got %+v", got)
	}
	// A browser may not redirect a profile's key or tools.
	for _, attack := range []string{
		`{"profile":"main","endpoint":{"baseUrl":"https://attacker.example/v1"},`,
		`{"profile":"main","toolCallback":{"endpoint":"https://attacker.example/"},`,
		`{"profile":"main","tools":[],`,
	} {
		cs := post(strings.Replace(chatHi, `{`, attack, 1))
		if got != nil {
			t.Errorf("%s: a run started with %+v", attack, got)
		}
		if e := errorText(cs); !strings.Contains(e, `profile "main" fixes the run's fields; remove`) {
			t.Errorf("%s: error %q", attack, e)
		}
	}
	cs := post(strings.Replace(chatHi, `{`, `{"profile":"nope",`, 1))
	if e := errorText(cs); !strings.Contains(e, `profile "nope" is not one of this server's run profiles ("fast", "main")`) {
		t.Errorf("unknown profile: %q", e)
	}
}

func errorText(cs []map[string]any) string {
	for _, c := range cs {
		if c["type"] == "error" {
			return c["errorText"].(string)
		}
	}
	return ""
}

// What the body cannot mean is refused inside the stream, in the client's
// dialect, where useChat shows it; nothing runs.
func TestChatRefusalsComeInTheStream(t *testing.T) {
	ran := false
	ts := newTestServer(t, runnerFunc(func(ctx context.Context, req *runnel.RunRequest, sink runnel.Sink) (*runnel.Result, error) {
		ran = true
		return helloRunner().Run(ctx, req, sink)
	}), nil)
	user := `{"id":"u1","role":"user","parts":[{"type":"text","text":"hi"}]}`
	for _, tt := range []struct{ name, body, header, want string }{
		{"unknown compat", `{"compat":"ai4","messages":[` + user + `]}`, "", `compat "ai4" is not a profile runnel knows`},
		{"compat field and header disagree", `{"compat":"ai5","messages":[` + user + `]}`, "ai7", `the compat field says "ai5" and the X-Runnel-Compat header "ai7"`},
		{"unknown role", `{"messages":[{"id":"x","role":"tool","parts":[]}]}`, "", `messages[0] has role "tool"`},
		{"unknown tool state", `{"messages":[` + user + `,{"id":"a","role":"assistant","parts":[{"type":"tool-x","toolCallId":"c1","state":"executed"}]}]}`, "",
			`tool call "c1" has state "executed", which is not an AI SDK tool state`},
		{"tool part without id", `{"messages":[` + user + `,{"id":"a","role":"assistant","parts":[{"type":"dynamic-tool","state":"input-available"}]}]}`, "",
			`messages[1].parts[0] is a tool part without a toolCallId`},
		{"answer without a decision", `{"messages":[` + user + `,{"id":"a","role":"assistant","parts":[{"type":"tool-x","toolCallId":"c1","state":"approval-responded","approval":{"id":"int_c1"}}]}]}`, "",
			`approval-responded without approval.approved`},
		{"file that is neither data nor http", `{"messages":[{"id":"u","role":"user","parts":[{"type":"file","mediaType":"image/png","url":"file:///etc/passwd"}]}]}`, "",
			`the file's url must be a data: or http(s) URL`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := []string{"Content-Type", "application/json"}
			if tt.header != "" {
				h = append(h, compatHeader, tt.header)
			}
			resp, body := do(t, ts, http.MethodPost, "/v1/chat", tt.body, h...)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			cs := chunks(t, body)
			if e := errorText(cs); !strings.Contains(e, tt.want) {
				t.Errorf("error %q, want it to contain %q", e, tt.want)
			}
			if last := cs[len(cs)-1]; last["type"] != "finish" {
				t.Errorf("last chunk %v", last)
			}
		})
	}
	if ran {
		t.Error("a run started")
	}
	// Undecodable JSON keeps its status, as on /run.
	resp, body := do(t, ts, http.MethodPost, "/v1/chat", `{"messages":`, "Content-Type", "application/json")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "invalid JSON") {
		t.Errorf("status %d: %s", resp.StatusCode, body)
	}
}
