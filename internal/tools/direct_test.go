package tools

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel"
)

func direct(name string, call *runnel.DirectCall) runnel.ToolSpec {
	s := spec(name, "")
	s.Call = call
	return s
}

// apiRequest is one request the platform API stand-in got.
type apiRequest struct {
	Method, URI, Authorization, ContentType string
	Body                                    string
	// IdempotencyKey is the tool call id, so a platform can refuse a
	// replayed call.
	IdempotencyKey string
}

// platformAPI is a real platform API mounted at /api: it records every
// request and answers with reply.
type platformAPI struct {
	*httptest.Server
	mu   sync.Mutex
	got  []apiRequest
	hits int
}

func newPlatformAPI(t *testing.T, reply func(w http.ResponseWriter, r *http.Request)) *platformAPI {
	t.Helper()
	p := &platformAPI{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		p.mu.Lock()
		p.got = append(p.got, apiRequest{r.Method, r.URL.RequestURI(), r.Header.Get("Authorization"), r.Header.Get("Content-Type"), string(body), r.Header.Get("Idempotency-Key")})
		p.hits++
		p.mu.Unlock()
		reply(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *platformAPI) requests() []apiRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]apiRequest(nil), p.got...)
}

func jsonReply(body string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}
}

func TestDirectCallRequests(t *testing.T) {
	runContext := json.RawMessage(`{"workflow":{"revision":"rev_9","n":3},"project":"p1"}`)
	tests := []struct {
		name  string
		call  runnel.DirectCall
		binds map[string]string
		input string
		want  apiRequest
	}{
		{"arguments into a nested field, static body over them, context last",
			runnel.DirectCall{Method: "POST", Path: "/api/workflows/invoke", ArgsInto: "data.inputs",
				Body:    json.RawMessage(`{"references":{"workflow":{"slug":"fixed"}},"data":{"mode":"sync"}}`),
				Context: map[string]string{"references.workflow_revision.id": "$ctx.workflow.revision"}},
			nil, `{"q":"hi","n":1.50}`,
			apiRequest{"POST", "/api/workflows/invoke", "Bearer t", "application/json",
				`{"data":{"inputs":{"n":1.50,"q":"hi"},"mode":"sync"},"references":{"workflow":{"slug":"fixed"},"workflow_revision":{"id":"rev_9"}}}`, ""}},
		{"arguments as the body; the static body wins a conflict",
			runnel.DirectCall{Method: "put", Path: "/api/items", Body: json.RawMessage(`{"owner":"platform"}`)},
			nil, `{"owner":"model","name":"x"}`,
			apiRequest{"PUT", "/api/items", "Bearer t", "application/json", `{"name":"x","owner":"platform"}`, ""}},
		{"a context value overrides the model",
			runnel.DirectCall{Method: "POST", Path: "/api/items", Context: map[string]string{"project": "$ctx.project"}},
			nil, `{"project":"someone-else","name":"x"}`,
			apiRequest{"POST", "/api/items", "Bearer t", "application/json", `{"name":"x","project":"p1"}`, ""}},
		{"path parameters come from the body and leave it",
			runnel.DirectCall{Method: "POST", Path: "/api/schedules/{id}/stop?force=true", Body: json.RawMessage(`{"reason":"asked"}`)},
			nil, `{"id":"sch 1/2"}`,
			apiRequest{"POST", "/api/schedules/sch%201%2F2/stop?force=true", "Bearer t", "application/json", `{"reason":"asked"}`, ""}},
		{"a nested path parameter, GET sends no body",
			runnel.DirectCall{Method: "GET", Path: "/api/traces/{trace.id}", ArgsInto: "trace"},
			nil, `{"id":42}`,
			apiRequest{"GET", "/api/traces/42", "Bearer t", "", "", ""}},
		{"contextBindings apply to the arguments first",
			runnel.DirectCall{Method: "DELETE", Path: "/api/projects/{project}"},
			map[string]string{"project": "$ctx.project"}, `{"project":"other"}`,
			apiRequest{"DELETE", "/api/projects/p1", "Bearer t", "", "", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newPlatformAPI(t, jsonReply(`{"ok":true}`))
			s := direct("act", &tt.call)
			s.ContextBindings = tt.binds
			r := registry(t, api.URL+"/api/tools/call", "Bearer t", &Options{RunContext: runContext}, s)
			got := r.Execute(context.Background(), Call{ID: "c1", Name: "act", Input: json.RawMessage(tt.input)})
			if diff := cmp.Diff(Result{Output: json.RawMessage(`{"ok":true}`)}, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			want := tt.want
			want.IdempotencyKey = "c1" // the call id, the same on every replay of the call
			if diff := cmp.Diff([]apiRequest{want}, api.requests()); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDirectCallConfinement: whatever the descriptor or the model's
// arguments say, a direct call stays on the callback's origin and under
// its mount, and a missing value fails the call instead of sending it.
func TestDirectCallConfinement(t *testing.T) {
	runContext := json.RawMessage(`{"project":"p1"}`)
	tests := []struct {
		name  string
		call  runnel.DirectCall
		input string
		want  string
	}{
		{"a parameter that climbs", runnel.DirectCall{Method: "GET", Path: "/api/items/{id}"}, `{"id":".."}`,
			"tool call act failed: the resolved path is not allowed: it must not contain '..' or backslashes"},
		{"an encoded climb", runnel.DirectCall{Method: "GET", Path: "/api/%2e%2e/admin"}, `{}`,
			"tool call act failed: the resolved path climbs out of the platform API"},
		{"outside the mount", runnel.DirectCall{Method: "GET", Path: "/admin/users"}, `{}`,
			`tool call act failed: the resolved path is outside the platform API mount "/api"`},
		{"a prefix that is not the mount", runnel.DirectCall{Method: "GET", Path: "/apiary"}, `{}`,
			`tool call act failed: the resolved path is outside the platform API mount "/api"`},
		{"a missing path parameter", runnel.DirectCall{Method: "GET", Path: "/api/items/{id}"}, `{}`,
			"tool call act failed: the path parameter {id} is missing"},
		{"an object path parameter", runnel.DirectCall{Method: "GET", Path: "/api/items/{id}"}, `{"id":{"a":1}}`,
			"tool call act failed: the path parameter {id} must be a string, number or boolean"},
		{"a missing context value", runnel.DirectCall{Method: "POST", Path: "/api/items", Context: map[string]string{"variant": "$ctx.variant.id"}}, `{"variant":"model-picked"}`,
			`tool call act failed: the run context has no value at "variant.id" for the call body field "variant"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newPlatformAPI(t, jsonReply(`{}`))
			r := registry(t, api.URL+"/api/tools/call", "Bearer t", &Options{RunContext: runContext}, direct("act", &tt.call))
			got := r.Execute(context.Background(), Call{ID: "c1", Name: "act", Input: json.RawMessage(tt.input)})
			if diff := cmp.Diff(textResult(tt.want, true), got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if api.hits != 0 {
				t.Errorf("the platform was called %d times", api.hits)
			}
		})
	}
}

func TestDirectCallAnswers(t *testing.T) {
	tests := []struct {
		name  string
		reply func(http.ResponseWriter, *http.Request)
		want  Result
	}{
		{"JSON is the result as it came", jsonReply("{\n  \"id\": 7 }\n"), Result{Output: json.RawMessage(`{"id":7}`)}},
		{"text is the result as text", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "done") },
			textResult("done", false)},
		{"an error status", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "secret internals", http.StatusForbidden) },
			textResult("tool call act failed: HTTP 403", true)},
		{"a redirect is not followed", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://169.254.169.254/latest", http.StatusFound)
		}, textResult("tool call act failed: HTTP 302", true)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newPlatformAPI(t, tt.reply)
			r := registry(t, api.URL+"/tools/call", "", nil, direct("act", &runnel.DirectCall{Method: "POST", Path: "/things"}))
			got := r.Execute(context.Background(), Call{ID: "c1", Name: "act", Input: json.RawMessage(`{}`)})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if api.hits != 1 {
				t.Errorf("the platform was called %d times, want once", api.hits)
			}
		})
	}
}

func TestMountOf(t *testing.T) {
	tests := []struct{ path, want string }{
		{"/api/tools/call", "/api"}, {"/tools/call", ""}, {"", ""}, {"/", ""},
		{"/api/tools/call/", "/api"}, {"/api/runnel/callback", "/api/runnel"}, {"/callback", ""},
	}
	for _, tt := range tests {
		if got := mountOf(tt.path); got != tt.want {
			t.Errorf("mountOf(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
}

// TestDeepMergeSkipsPrototypeKeys: a static body cannot smuggle keys that
// a JavaScript platform merging it further would treat as its prototype.
func TestDeepMergeSkipsPrototypeKeys(t *testing.T) {
	body := map[string]any{"a": map[string]any{"x": 1}}
	deepMerge(body, map[string]any{
		"__proto__": map[string]any{"admin": true}, "constructor": 1,
		"a": map[string]any{"prototype": 2, "y": 3},
	})
	want := map[string]any{"a": map[string]any{"x": 1, "y": 3}}
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("merged (-want +got):\n%s", diff)
	}
}

// TestCapResult: output from outside runnel (a browser's) is held to the
// same 1 MB as any tool result.
func TestCapResult(t *testing.T) {
	small := Result{Output: json.RawMessage(`{"ok":true}`), IsError: true}
	if diff := cmp.Diff(small, CapResult(small)); diff != "" {
		t.Errorf("a small result changed (-want +got):\n%s", diff)
	}
	big, _ := json.Marshal(strings.Repeat("x", maxContentBytes+10))
	got := CapResult(Result{Output: big})
	want := textResult(strings.Repeat("x", maxContentBytes)+" [... 10 bytes omitted]", false)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("a big result was not cut (-want +got): %d bytes", len(got.Output))
	}
}
