package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/runnel/runnel"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// received is one request the platform stand-in got.
type received struct {
	Method, ContentType, Authorization string
	Body                               json.RawMessage
}

// platform is a real callback endpoint: it records each request and
// answers with the handler's reply.
type platform struct {
	*httptest.Server
	mu   sync.Mutex
	got  []received
	hits int
}

func newPlatform(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, body []byte)) *platform {
	t.Helper()
	p := &platform{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		p.mu.Lock()
		p.got = append(p.got, received{r.Method, r.Header.Get("Content-Type"), r.Header.Get("Authorization"), body})
		p.hits++
		p.mu.Unlock()
		answer(w, r, body)
	}))
	t.Cleanup(p.Close)
	return p
}

func okReply(content string) func(http.ResponseWriter, *http.Request, []byte) {
	return func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		c, _ := json.Marshal(content)
		fmt.Fprintf(w, `{"call":{"id":"x","status":{"code":"STATUS_CODE_OK"},"data":{"role":"tool","tool_call_id":"x","content":%s}}}`, c)
	}
}

func registry(t *testing.T, endpoint, auth string, opts *Options, specs ...runnel.ToolSpec) *Registry {
	t.Helper()
	r, err := New(specs, &runnel.ToolCallback{Endpoint: endpoint, Authorization: auth}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func spec(name, ref string) runnel.ToolSpec {
	return runnel.ToolSpec{Name: name, CallRef: ref, InputSchema: runnel.PermissiveSchema()}
}

func TestCallbackEnvelope(t *testing.T) {
	p := newPlatform(t, okReply("sunny"))
	tests := []struct {
		name     string
		spec     runnel.ToolSpec
		auth     string
		wantBody string
	}{
		{"callRef names the function", spec("get_weather", "tools__weather__GET"), "Access tok-123",
			`{"data":{"id":"call_1","type":"function","function":{"name":"tools__weather__GET","arguments":{"city":"Paris"}}}}`},
		{"the tool name without callRef, no authorization", spec("get_weather", ""), "",
			`{"data":{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":{"city":"Paris"}}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p.mu.Lock()
			p.got = nil
			p.mu.Unlock()
			r := registry(t, p.URL+"/tools/call", tt.auth, nil, tt.spec)
			res := r.Execute(context.Background(), Call{ID: "call_1", Name: "get_weather", Input: json.RawMessage(`{"city":"Paris"}`)})
			if diff := cmp.Diff(Result{Output: runnel.TextOutput("sunny")}, res); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			want := []received{{"POST", "application/json", tt.auth, json.RawMessage(tt.wantBody)}}
			if diff := cmp.Diff(want, p.got); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCallbackFailuresAreToolErrors(t *testing.T) {
	big := strings.Repeat("é", 500_005) // 1,000,010 bytes
	tests := []struct {
		name   string
		answer func(http.ResponseWriter, *http.Request, []byte)
		want   string
		isErr  bool
	}{
		{"error status", func(w http.ResponseWriter, _ *http.Request, _ []byte) {
			io.WriteString(w, `{"call":{"id":"x","status":{"code":"STATUS_CODE_ERROR","message":"quota exceeded"},"data":{"role":"tool","content":"try later"}}}`)
		}, "tool call ref failed: quota exceeded\ntry later", true},
		{"non-2xx hides the body", func(w http.ResponseWriter, _ *http.Request, _ []byte) {
			http.Error(w, "stack trace with internals", http.StatusBadGateway)
		}, "tool call ref failed: HTTP 502", true},
		{"unreadable JSON", func(w http.ResponseWriter, _ *http.Request, _ []byte) {
			io.WriteString(w, `<html>`)
		}, `tool call ref failed: the tool endpoint answered with something other than the expected JSON envelope {"call": {...}}.`, true},
		{"JSON without call", func(w http.ResponseWriter, _ *http.Request, _ []byte) {
			io.WriteString(w, `{"ok":true}`)
		}, `tool call ref failed: the tool endpoint answered with something other than the expected JSON envelope {"call": {...}}.`, true},
		{"structured content is passed as JSON text", func(w http.ResponseWriter, _ *http.Request, _ []byte) {
			io.WriteString(w, `{"call":{"status":{"code":"STATUS_CODE_OK"},"data":{"content":{"temp":21}}}}`)
		}, `{"temp":21}`, false},
		{"oversize content is cut", okReply(big),
			strings.Repeat("é", 500_000) + " [... 10 bytes omitted]", false},
		{"answer over 4 MiB", func(w http.ResponseWriter, _ *http.Request, _ []byte) {
			io.WriteString(w, `{"call":{"data":{"content":"`+strings.Repeat("x", 4<<20)+`"}}}`)
		}, "tool call ref failed: the answer is larger than 4 MiB", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPlatform(t, tt.answer)
			r := registry(t, p.URL, "", nil, spec("t", "ref"))
			got := r.Execute(context.Background(), Call{ID: "c", Name: "t", Input: json.RawMessage(`{}`)})
			if diff := cmp.Diff(Result{Output: runnel.TextOutput(tt.want), IsError: tt.isErr}, got); diff != "" {
				t.Errorf("result (-want +got):\n%.2000s", diff)
			}
		})
	}
}

// blockingPlatform never answers until the client gives up.
func blockingPlatform(t *testing.T, started chan<- struct{}) *platform {
	return newPlatform(t, func(_ http.ResponseWriter, r *http.Request, _ []byte) {
		if started != nil {
			close(started)
		}
		<-r.Context().Done()
	})
}

func TestCallbackTimeout(t *testing.T) {
	p := blockingPlatform(t, nil)
	r := registry(t, p.URL, "", &Options{Timeout: time.Millisecond}, spec("t", "ref"))
	got := r.Execute(context.Background(), Call{ID: "c", Name: "t", Input: json.RawMessage(`{}`)})
	want := Result{Output: runnel.TextOutput("tool call ref timed out after 1ms without an answer."), IsError: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
}

func TestCallbackTimeoutFor(t *testing.T) {
	c := newCallback(&runnel.ToolCallback{Endpoint: "http://x"}, nil, &Options{Timeout: 7 * time.Second})
	tests := []struct {
		timeoutMs int64
		want      time.Duration
	}{
		{0, 7 * time.Second},
		{120000, 130 * time.Second},
	}
	for _, tt := range tests {
		if got := c.timeoutFor(&runnel.ToolSpec{TimeoutMs: tt.timeoutMs}); got != tt.want {
			t.Errorf("timeoutFor(%d) = %s, want %s", tt.timeoutMs, got, tt.want)
		}
	}
	if got := newCallback(&runnel.ToolCallback{}, nil, &Options{}).timeout; got != DefaultTimeout {
		t.Errorf("default timeout = %s, want %s", got, DefaultTimeout)
	}
}

func TestCallbackCancelledWithTheRun(t *testing.T) {
	started := make(chan struct{})
	p := blockingPlatform(t, started)
	r := registry(t, p.URL, "", nil, spec("t", "ref"))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	got := r.Execute(ctx, Call{ID: "c", Name: "t", Input: json.RawMessage(`{}`)})
	want := Result{Output: runnel.TextOutput("tool call ref was cancelled because the run ended."), IsError: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
}

func TestCallbackDoesNotFollowRedirects(t *testing.T) {
	elsewhere := newPlatform(t, okReply("leaked"))
	p := newPlatform(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		http.Redirect(w, r, elsewhere.URL, http.StatusTemporaryRedirect)
	})
	r := registry(t, p.URL, "Bearer secret-token", nil, spec("t", "ref"))
	got := r.Execute(context.Background(), Call{ID: "c", Name: "t", Input: json.RawMessage(`{}`)})
	if diff := cmp.Diff(Result{Output: runnel.TextOutput("tool call ref failed: HTTP 307"), IsError: true}, got); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	if elsewhere.hits != 0 {
		t.Errorf("the redirect target was called %d times", elsewhere.hits)
	}
}

func TestCallbackUnreachable(t *testing.T) {
	p := newPlatform(t, okReply(""))
	url := p.URL
	p.Close()
	r := registry(t, url, "", nil, spec("t", "ref"))
	got := r.Execute(context.Background(), Call{ID: "c", Name: "t", Input: json.RawMessage(`{}`)})
	if text := string(got.Output); !got.IsError || !strings.Contains(text, "tool call ref failed: the tool endpoint could not be reached") {
		t.Errorf("result = %s (isError %v), want an unreachable tool error", text, got.IsError)
	}
	if strings.Contains(string(got.Output), url) {
		t.Errorf("result names the endpoint URL: %s", got.Output)
	}
}

func TestContextBindings(t *testing.T) {
	p := newPlatform(t, okReply("ok"))
	s := spec("get_user", "ref")
	s.ContextBindings = map[string]string{
		"target.workflow_variant_id": "$ctx.workflow.variant.id",
		"run_kind":                   "$ctx.run.kind",
		"absent":                     "$ctx.no.such.value",
	}
	runContext := json.RawMessage(`{"run":{"kind":"test"},"workflow":{"variant":{"id":"var_abc","n":3}}}`)
	r := registry(t, p.URL, "", &Options{RunContext: runContext}, s)
	// The model tries to set bound fields: the binding wins, and a bound
	// field runContext has no value for is removed, not left to the model.
	r.Execute(context.Background(), Call{ID: "c", Name: "get_user", Input: json.RawMessage(`{"q":1.50,"absent":"evil","target":{"workflow_variant_id":"evil","x":1}}`)})
	var env struct {
		Data struct {
			Function struct {
				Arguments json.RawMessage `json:"arguments"`
			} `json:"function"`
		} `json:"data"`
	}
	if err := json.Unmarshal(p.got[0].Body, &env); err != nil {
		t.Fatal(err)
	}
	want := `{"q":1.50,"run_kind":"test","target":{"workflow_variant_id":"var_abc","x":1}}`
	if got := string(env.Data.Function.Arguments); got != want {
		t.Errorf("arguments = %s, want %s", got, want)
	}
}

func TestNewRefuses(t *testing.T) {
	cb := &runnel.ToolCallback{Endpoint: "https://api.example/tools/call"}
	withKind := func(name string, kind runnel.ToolKind) runnel.ToolSpec {
		s := spec(name, "")
		s.Kind = kind
		return s
	}
	badBinding := spec("b", "")
	badBinding.ContextBindings = map[string]string{"__proto__.x": "$ctx.a"}
	literalBinding := spec("b", "")
	literalBinding.ContextBindings = map[string]string{"x": "literal"}
	clientWithCall := withKind("c", runnel.ToolKindClient)
	clientWithCall.Call = &runnel.DirectCall{Method: "GET", Path: "/x"}
	badSchema := spec("s", "")
	badSchema.InputSchema = json.RawMessage(`[]`)
	tests := []struct {
		name  string
		specs []runnel.ToolSpec
		cb    *runnel.ToolCallback
		want  string
	}{
		{"invalid name", []runnel.ToolSpec{spec("has space", "")}, cb,
			`Tool name "has space" is not valid: model APIs accept 1 to 64 letters, digits, '_' or '-' (^[a-zA-Z0-9_-]{1,64}$).`},
		{"name too long", []runnel.ToolSpec{spec(strings.Repeat("a", 65), "")}, cb,
			`Tool name "` + strings.Repeat("a", 65) + `" is not valid: model APIs accept 1 to 64 letters, digits, '_' or '-' (^[a-zA-Z0-9_-]{1,64}$).`},
		{"duplicate", []runnel.ToolSpec{spec("a", ""), spec("a", "")}, cb,
			`Tool name "a" is declared more than once in customTools; tool names must be unique.`},
		{"code tool", []runnel.ToolSpec{withKind("c", runnel.ToolKindCode)}, cb, "Code tools are not supported by the sidecar."},
		{"client tool with a call", []runnel.ToolSpec{clientWithCall}, cb,
			`Tool "c" is a client tool (the browser runs it); remove its contextBindings and call, which only apply to tools runnel executes.`},
		{"direct call method", []runnel.ToolSpec{direct("d", &runnel.DirectCall{Method: "PATCH", Path: "/x"})}, cb,
			`Tool "d" has call.method "PATCH"; use GET, POST, PUT or DELETE.`},
		{"direct call to another host", []runnel.ToolSpec{direct("d", &runnel.DirectCall{Method: "GET", Path: "//evil.example/x"})}, cb,
			`Tool "d" has call.path "//evil.example/x": it must be a path on the platform API starting with a single '/'.`},
		{"direct call to an absolute URL", []runnel.ToolSpec{direct("d", &runnel.DirectCall{Method: "GET", Path: "https://evil.example/x"})}, cb,
			`Tool "d" has call.path "https://evil.example/x": it must be a path on the platform API starting with a single '/'.`},
		{"direct call climbing out", []runnel.ToolSpec{direct("d", &runnel.DirectCall{Method: "GET", Path: "/api/../admin"})}, cb,
			`Tool "d" has call.path "/api/../admin": it must not contain '..' or backslashes.`},
		{"direct call args_into __proto__", []runnel.ToolSpec{direct("d", &runnel.DirectCall{Method: "POST", Path: "/x", ArgsInto: "data.__proto__"})}, cb,
			`Tool "d" has call.args_into "data.__proto__", which is not a dotted body path (empty, __proto__, constructor and prototype segments are refused).`},
		{"direct call context constructor", []runnel.ToolSpec{direct("d", &runnel.DirectCall{Method: "POST", Path: "/x", Context: map[string]string{"constructor.prototype": "$ctx.a"}})}, cb,
			`Tool "d" has a call.context path "constructor.prototype" that is not a dotted body path (empty, __proto__, constructor and prototype segments are refused).`},
		{"direct call context literal", []runnel.ToolSpec{direct("d", &runnel.DirectCall{Method: "POST", Path: "/x", Context: map[string]string{"a": "b"}})}, cb,
			`Tool "d" binds call body field "a" to "b"; call.context values must be "$ctx.<dotted.path>".`},
		{"direct call body not an object", []runnel.ToolSpec{direct("d", &runnel.DirectCall{Method: "POST", Path: "/x", Body: json.RawMessage(`[1]`)})}, cb,
			`Tool "d" has a call.body that is not a JSON object.`},
		{"direct call without toolCallback", []runnel.ToolSpec{direct("d", &runnel.DirectCall{Method: "GET", Path: "/x"})}, nil,
			`Tool "d" is a callback tool, but the request has no toolCallback; set toolCallback.endpoint to the URL that executes callback tools.`},
		{"unknown kind", []runnel.ToolSpec{withKind("c", "magic")}, cb,
			`Tool "c" has unknown kind "magic"; use "callback", "client" or "code".`},
		{"callback without toolCallback", []runnel.ToolSpec{spec("a", "")}, nil,
			`Tool "a" is a callback tool, but the request has no toolCallback; set toolCallback.endpoint to the URL that executes callback tools.`},
		{"callback with empty endpoint", []runnel.ToolSpec{spec("a", "")}, &runnel.ToolCallback{},
			`Tool "a" is a callback tool, but the request has no toolCallback; set toolCallback.endpoint to the URL that executes callback tools.`},
		{"endpoint not http", []runnel.ToolSpec{spec("a", "")}, &runnel.ToolCallback{Endpoint: "file:///etc/passwd"},
			"toolCallback.endpoint is not an absolute http(s) URL."},
		{"unsafe binding", []runnel.ToolSpec{badBinding}, cb,
			`Tool "b" has a contextBindings path "__proto__.x" that is not a dotted argument path (empty, __proto__, constructor and prototype segments are refused).`},
		{"literal binding", []runnel.ToolSpec{literalBinding}, cb,
			`Tool "b" binds "x" to "literal"; contextBindings values must be "$ctx.<dotted.path>".`},
		{"schema not an object", []runnel.ToolSpec{badSchema}, cb, `Tool "s" has an inputSchema that is not a JSON object.`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.specs, tt.cb, nil)
			if err == nil {
				t.Fatal("New accepted the specs")
			}
			if got := runnel.ErrorCodeOf(err); got != runnel.CodeInvalidRequest {
				t.Errorf("code = %q, want invalid_request", got)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewWithoutCallbackTools(t *testing.T) {
	r, err := New(nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := r.Execute(context.Background(), Call{ID: "c", Name: "x"})
	if diff := cmp.Diff(Result{Output: runnel.TextOutput("Tool 'x' is not available."), IsError: true}, got); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
}

func TestParseBuiltins(t *testing.T) {
	tests := []struct {
		name    string
		in      []string
		want    []string
		wantErr string
	}{
		{"absent means the default set", nil, []string{"read", "bash", "edit", "write"}, ""},
		{"empty means none", []string{}, []string{}, ""},
		{"case-insensitive, once each", []string{"Read", "GREP", "read"}, []string{"read", "grep"}, ""},
		{"unknown", []string{"read", "WebFetch"}, nil, `Unknown builtin tool "WebFetch" in tools; the builtins are read, write, edit, ls, find, grep, bash.`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseBuiltins(tt.in)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tt.wantErr, gotErr); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("builtins (-want +got):\n%s", diff)
			}
		})
	}
}
