package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/strictjson"
)

// callbackSuffix ends a toolCallback endpoint path; what comes before it
// is where the platform API is mounted.
const callbackSuffix = "/tools/call"

// directMethods are the methods a direct call may use (DESIGN §4.3).
func directMethods() []string {
	return []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete}
}

// mountOf is the path prefix every direct call must stay under: the
// endpoint path without its trailing /tools/call, or, for an endpoint
// named otherwise, the directory it sits in. "" means the origin's root.
func mountOf(endpointPath string) string {
	p := strings.TrimSuffix(endpointPath, "/")
	if m, ok := strings.CutSuffix(p, callbackSuffix); ok {
		return m
	}
	if dir := path.Dir(p); dir != "/" && dir != "." {
		return dir
	}
	return ""
}

// checkDirectCall refuses a call descriptor that could never run safely,
// so the caller hears about it before the run instead of the model
// hearing about it on every call.
func checkDirectCall(name string, dc *runnel.DirectCall) error {
	method := strings.ToUpper(strings.TrimSpace(dc.Method))
	if !slices.Contains(directMethods(), method) {
		return invalid("Tool %q has call.method %q; use GET, POST, PUT or DELETE.", name, dc.Method)
	}
	if err := checkRoute(dc.Path); err != nil {
		return invalid("Tool %q has call.path %q: %v.", name, dc.Path, err)
	}
	if dc.ArgsInto != "" && !safePath(dc.ArgsInto) {
		return invalid("Tool %q has call.args_into %q, which is not a dotted body path (empty, __proto__, constructor and prototype segments are refused).", name, dc.ArgsInto)
	}
	if b := bytes.TrimSpace(dc.Body); len(b) > 0 && !bytes.Equal(b, []byte("null")) {
		var obj map[string]json.RawMessage
		if b[0] != '{' || json.Unmarshal(b, &obj) != nil {
			return invalid("Tool %q has a call.body that is not a JSON object.", name)
		}
	}
	for p, ref := range dc.Context {
		if !safePath(p) {
			return invalid("Tool %q has a call.context path %q that is not a dotted body path (empty, __proto__, constructor and prototype segments are refused).", name, p)
		}
		if !strings.HasPrefix(ref, ctxPrefix) || !safePath(strings.TrimPrefix(ref, ctxPrefix)) {
			return invalid("Tool %q binds call body field %q to %q; call.context values must be \"$ctx.<dotted.path>\".", name, p, ref)
		}
	}
	return nil
}

// checkRoute checks a route as written, before and after its {params} are
// filled: one absolute path on the same host, nothing that climbs out.
func checkRoute(route string) error {
	switch {
	case !strings.HasPrefix(route, "/") || strings.HasPrefix(route, "//"):
		return errors.New("it must be a path on the platform API starting with a single '/'")
	case strings.Contains(route, ".."), strings.Contains(route, `\`):
		return errors.New("it must not contain '..' or backslashes")
	case strings.IndexFunc(route, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0:
		return errors.New("it must not contain spaces or control characters")
	}
	return nil
}

// direct executes a callback tool that carries a call descriptor: it
// calls the platform API route itself instead of the toolCallback
// envelope (DESIGN §4.3). The response body, JSON or text, is the result.
func (c *callback) direct(ctx context.Context, spec *runnel.ToolSpec, call Call) Result {
	fail := func(format string, args ...any) Result {
		return textResult(fmt.Sprintf("tool call %s failed: ", spec.Name)+fmt.Sprintf(format, args...), true)
	}
	args, err := outgoingArgs(call.Input, spec, c.runContext)
	if err != nil {
		return fail("%v", err)
	}
	body, err := assembleBody(spec.Call, args, c.runContext)
	if err != nil {
		return fail("%v", err)
	}
	target, err := c.directURL(spec.Call.Path, body)
	if err != nil {
		return fail("%v", err)
	}
	method := strings.ToUpper(strings.TrimSpace(spec.Call.Method))
	var payload []byte
	if method == http.MethodPost || method == http.MethodPut {
		if payload, err = json.Marshal(body); err != nil {
			return fail("its body could not be encoded")
		}
	}
	timeout := c.timeoutFor(spec)
	tctx, cancel := context.WithTimeoutCause(ctx, timeout, errToolTimeout)
	defer cancel()
	start := time.Now()
	raw, status, err := c.send(tctx, method, target, payload, call.ID)
	c.log.DebugContext(ctx, "tool direct call", "tool", spec.Name, "method", method, "route", spec.Call.Path,
		"status", status, "duration", time.Since(start))
	switch {
	case err != nil && ctx.Err() != nil:
		return textResult(fmt.Sprintf("tool call %s was cancelled because the run ended.", spec.Name), true)
	case err != nil && errors.Is(context.Cause(tctx), errToolTimeout):
		return textResult(fmt.Sprintf("tool call %s timed out after %s without an answer.", spec.Name, timeout), true)
	case err != nil:
		return fail("%v", err)
	case status < 200 || status > 299:
		c.log.DebugContext(ctx, "tool direct call error body", "tool", spec.Name, "status", status,
			"body", string(raw[:min(len(raw), maxLoggedErrorBody)]))
		return fail("HTTP %d", status)
	}
	return bodyResult(raw)
}

// assembleBody builds a direct call's body (DESIGN §4.3), each step
// winning over the one before: the model's arguments, at args_into or as
// the body itself; then the static body; then the context values from
// runContext. A context value runContext lacks fails the call: the field
// it fills usually names what the call acts on, and the model must not be
// the one to choose it.
func assembleBody(dc *runnel.DirectCall, args json.RawMessage, runContext map[string]any) (map[string]any, error) {
	modelArgs, err := decodeJSON(args)
	if err != nil {
		return nil, errors.New("its arguments are not JSON")
	}
	body := map[string]any{}
	if dc.ArgsInto != "" {
		if !setPath(body, dc.ArgsInto, modelArgs) {
			return nil, errors.New("call.args_into is not a safe dotted path")
		}
	} else if obj, ok := modelArgs.(map[string]any); ok {
		body = obj
	}
	if b := bytes.TrimSpace(dc.Body); len(b) > 0 {
		static, err := decodeJSON(b)
		if err != nil {
			return nil, errors.New("call.body is not JSON")
		}
		if obj, ok := static.(map[string]any); ok {
			deepMerge(body, obj)
		}
	}
	paths := make([]string, 0, len(dc.Context))
	for p := range dc.Context {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		ref, _ := strings.CutPrefix(dc.Context[p], ctxPrefix)
		v, ok := lookup(runContext, ref)
		if !ok {
			return nil, fmt.Errorf("the run context has no value at %q for the call body field %q", ref, p)
		}
		deletePath(body, p)
		if !setPath(body, p, v) {
			return nil, errors.New("a call.context path is not a safe dotted path")
		}
	}
	return body, nil
}

// decodeJSON decodes raw keeping numbers as json.Number, so values reach
// the platform as they were written.
func decodeJSON(raw []byte) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return map[string]any{}, nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// directURL fills the route's {params} from the body (removing them from
// it: the route carries them now) and resolves it on the endpoint's
// origin. The result must stay on that origin and under the mount, so a
// call descriptor or a model-chosen parameter can never reach another
// host or another part of the platform.
func (c *callback) directURL(route string, body map[string]any) (string, error) {
	filled, err := fillParams(route, body)
	if err != nil {
		return "", err
	}
	if err := checkRoute(filled); err != nil {
		return "", fmt.Errorf("the resolved path is not allowed: %v", err)
	}
	ref, err := url.Parse(filled)
	if err != nil || ref.Scheme != "" || ref.Host != "" || ref.User != nil {
		return "", errors.New("the resolved path is not a valid path")
	}
	u := *c.base
	u.Path, u.RawPath, u.RawQuery, u.Fragment = ref.Path, ref.RawPath, ref.RawQuery, ""
	// Percent-encoding can hide a climb ("%2e%2e"); u.Path is decoded.
	for _, seg := range strings.Split(u.Path, "/") {
		if seg == "." || seg == ".." {
			return "", errors.New("the resolved path climbs out of the platform API")
		}
	}
	if c.mount != "" && u.Path != c.mount && !strings.HasPrefix(u.Path, c.mount+"/") {
		return "", fmt.Errorf("the resolved path is outside the platform API mount %q", c.mount)
	}
	return u.String(), nil
}

// fillParams replaces each {name} of the route (a dotted body path) with
// the body's scalar value there, path-escaped.
func fillParams(route string, body map[string]any) (string, error) {
	var b strings.Builder
	rest := route
	for {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			b.WriteString(rest)
			return b.String(), nil
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return "", errors.New("the path has a '{' without a '}'")
		}
		name := rest[open+1 : open+end]
		v, ok := lookup(body, name)
		if !ok || v == nil {
			return "", fmt.Errorf("the path parameter {%s} is missing", name)
		}
		var s string
		switch v := v.(type) {
		case string:
			s = v
		case json.Number:
			s = v.String()
		case bool:
			s = fmt.Sprint(v)
		default:
			return "", fmt.Errorf("the path parameter {%s} must be a string, number or boolean", name)
		}
		if s == "" {
			return "", fmt.Errorf("the path parameter {%s} is empty", name)
		}
		deletePath(body, name)
		b.WriteString(rest[:open])
		b.WriteString(url.PathEscape(s))
		rest = rest[open+end+1:]
	}
}

// bodyResult is a response body as the model reads it: JSON as it came,
// anything else as text, and either cut to maxContentBytes. JSON that
// internal/strictjson refuses (a member twice) is passed as text: the
// result goes into the conversation, and a replay holding it as JSON
// would be refused.
func bodyResult(raw []byte) Result {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) > 0 && len(trimmed) <= maxContentBytes && strictjson.Check(trimmed) == nil {
		var b bytes.Buffer
		if json.Compact(&b, trimmed) == nil {
			return Result{Output: b.Bytes()}
		}
	}
	return textResult(capContent(string(raw)), false)
}
