// Package tools holds a run's tool registry and the executors behind it:
// the callback executor (DESIGN §4.2), which POSTs each call to the
// platform's toolCallback endpoint, and the direct executor (§4.3), which
// calls a platform API route on the same origin. Client tools (§4.4) are
// registered too, but the browser runs them: the caller pauses for them.
// The builtins (§4.5, builtin_*.go) work in a run's sandbox.Workspace and
// are built per run with NewBuiltins.
//
// A Registry is built once per run from the request's custom tool specs;
// New refuses specs that cannot run, with a sentence the caller can act on.
// Execute never fails the run: every problem is a Result with IsError, for
// the model to read. The Registry decides nothing about permissions; the
// caller asks first and then calls Execute, which applies contextBindings
// (so a permission key or rule sees the model's arguments, never the
// platform's bound values).
//
//	reg, err := tools.New(req.CustomTools, req.ToolCallback, &tools.Options{RunContext: req.RunContext})
//	if err != nil {
//		return err // a *runnel.Error with code invalid_request
//	}
//	res := reg.Execute(ctx, tools.Call{ID: "call_1", Name: "get_user", Input: args})
package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/runnel/runnel"
)

// DefaultTimeout is a callback tool's timeout when its spec sets none.
const DefaultTimeout = 30 * time.Second

// maxTimeoutMs bounds a spec's timeoutMs, so that it cannot overflow a
// time.Duration (which would end the call at once, or never).
const maxTimeoutMs = 24 * 60 * 60 * 1000

// Options configures a Registry. A zero field means the documented default.
type Options struct {
	// HTTPClient reaches the callback endpoint; nil means a client without
	// an overall timeout. Redirects are never followed, whatever the
	// client's own policy.
	HTTPClient *http.Client
	// Timeout bounds a callback call whose spec sets no timeoutMs
	// (default DefaultTimeout).
	Timeout time.Duration
	// RunContext is the request's runContext, read by contextBindings.
	RunContext json.RawMessage
	// Logger receives debug logs; nil discards them. Authorization values
	// are never logged.
	Logger *slog.Logger
}

// Call is one tool call to execute. Input is a JSON object.
type Call struct {
	ID    string
	Name  string
	Input json.RawMessage
}

// Result is what the model reads back. It has the shape of
// harness.ToolResult, so one converts to the other.
type Result struct {
	// Output is JSON; callback content is a JSON string.
	Output  json.RawMessage
	IsError bool
}

func textResult(text string, isError bool) Result {
	return Result{Output: runnel.TextOutput(text), IsError: isError}
}

// Registry is a run's set of custom tools. It is safe for concurrent use.
type Registry struct {
	specs    []runnel.ToolSpec
	byName   map[string]int
	callback *callback
}

// validName reports whether name is what every model API accepts as a
// function name: ^[a-zA-Z0-9_-]{1,64}$.
func validName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for _, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

// New checks specs and returns their registry, or a *runnel.Error with
// code invalid_request naming the first spec that cannot run.
func New(specs []runnel.ToolSpec, cb *runnel.ToolCallback, opts *Options) (*Registry, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	r := &Registry{byName: make(map[string]int, len(specs))}
	needsCallback := ""
	for i, s := range specs {
		// A spec built in Go rather than decoded may have no schema; it
		// gets the same permissive default the decoder gives.
		if len(bytes.TrimSpace(s.InputSchema)) == 0 {
			s.InputSchema = runnel.PermissiveSchema()
		}
		if err := checkSpec(&s); err != nil {
			return nil, err
		}
		if _, dup := r.byName[s.Name]; dup {
			return nil, invalid("Tool name %q is declared more than once in customTools; tool names must be unique.", s.Name)
		}
		r.byName[s.Name] = i
		r.specs = append(r.specs, s)
		if s.EffectiveKind() == runnel.ToolKindCallback && needsCallback == "" {
			needsCallback = s.Name
		}
	}
	if needsCallback != "" {
		if cb == nil || cb.Endpoint == "" {
			return nil, invalid("Tool %q is a callback tool, but the request has no toolCallback; set toolCallback.endpoint to the URL that executes callback tools.", needsCallback)
		}
		if err := checkEndpoint(cb.Endpoint); err != nil {
			return nil, err
		}
		ctxValues, err := decodeRunContext(o.RunContext)
		if err != nil {
			return nil, err
		}
		r.callback = newCallback(cb, ctxValues, &o)
	}
	return r, nil
}

func checkSpec(s *runnel.ToolSpec) error {
	if !validName(s.Name) {
		return invalid("Tool name %q is not valid: model APIs accept 1 to 64 letters, digits, '_' or '-' (^[a-zA-Z0-9_-]{1,64}$).", s.Name)
	}
	switch s.EffectiveKind() {
	case runnel.ToolKindCallback, runnel.ToolKindClient:
	case runnel.ToolKindCode:
		return invalid("Code tools are not supported by the sidecar.")
	default:
		return invalid("Tool %q has unknown kind %q; use \"callback\", \"client\" or \"code\".", s.Name, s.Kind)
	}
	if s.TimeoutMs < 0 || s.TimeoutMs > maxTimeoutMs {
		return invalid("Tool %q has timeoutMs %d; it must be between 0 and %d (a day).", s.Name, s.TimeoutMs, int64(maxTimeoutMs))
	}
	// A client tool's arguments go to the browser as the model wrote them;
	// bound values and a platform call would be promises runnel cannot keep.
	if s.EffectiveKind() == runnel.ToolKindClient && (len(s.ContextBindings) > 0 || s.Call != nil) {
		return invalid("Tool %q is a client tool (the browser runs it); remove its contextBindings and call, which only apply to tools runnel executes.", s.Name)
	}
	for path, ref := range s.ContextBindings {
		if !safePath(path) {
			return invalid("Tool %q has a contextBindings path %q that is not a dotted argument path (empty, __proto__, constructor and prototype segments are refused).", s.Name, path)
		}
		if !strings.HasPrefix(ref, ctxPrefix) || !safePath(strings.TrimPrefix(ref, ctxPrefix)) {
			return invalid("Tool %q binds %q to %q; contextBindings values must be \"$ctx.<dotted.path>\".", s.Name, path, ref)
		}
	}
	if sch := bytes.TrimSpace(s.InputSchema); len(sch) == 0 || sch[0] != '{' || !json.Valid(sch) {
		return invalid("Tool %q has an inputSchema that is not a JSON object.", s.Name)
	}
	if s.Call != nil {
		return checkDirectCall(s.Name, s.Call)
	}
	return nil
}

func checkEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return invalid("toolCallback.endpoint is not an absolute http(s) URL.")
	}
	return nil
}

func invalid(format string, args ...any) *runnel.Error {
	return runnel.Errorf(runnel.CodeInvalidRequest, format, args...)
}

// Specs returns the registered specs, in request order.
func (r *Registry) Specs() []runnel.ToolSpec { return r.specs }

// Spec returns the spec named name.
func (r *Registry) Spec(name string) (runnel.ToolSpec, bool) {
	i, ok := r.byName[name]
	if !ok {
		return runnel.ToolSpec{}, false
	}
	return r.specs[i], true
}

// IsClient reports whether name is a client tool, which the browser runs.
func (r *Registry) IsClient(name string) bool {
	s, ok := r.Spec(name)
	return ok && s.EffectiveKind() == runnel.ToolKindClient
}

// BoundPaths returns the dotted argument paths the tool's contextBindings
// set, sorted; nil when it has none. A permission key leaves them out: the
// model's value there never reaches the tool.
func (r *Registry) BoundPaths(name string) []string {
	s, ok := r.Spec(name)
	if !ok || len(s.ContextBindings) == 0 {
		return nil
	}
	paths := make([]string, 0, len(s.ContextBindings))
	for p := range s.ContextBindings {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	return paths
}

// Execute runs one call and returns what the model reads back. It returns
// when ctx is done, with an error result. The call's Input is the model's
// arguments; contextBindings are applied here, after whatever permission
// decision the caller made.
func (r *Registry) Execute(ctx context.Context, c Call) Result {
	spec, ok := r.Spec(c.Name)
	switch {
	case !ok:
		return textResult(fmt.Sprintf("Tool '%s' is not available.", c.Name), true)
	case spec.EffectiveKind() == runnel.ToolKindClient:
		return textResult(fmt.Sprintf("Tool '%s' is a client tool: the browser runs it, not runnel.", c.Name), true)
	case r.callback == nil:
		return textResult(fmt.Sprintf("Tool '%s' cannot be executed: no toolCallback is configured.", c.Name), true)
	case spec.Call != nil:
		return r.callback.direct(ctx, &spec, c)
	}
	return r.callback.execute(ctx, &spec, c)
}
