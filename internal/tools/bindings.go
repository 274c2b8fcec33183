package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"sort"
	"strings"

	"github.com/runnel/runnel"
)

// ctxPrefix starts a contextBindings value that names a runContext path.
const ctxPrefix = "$ctx."

// decodeRunContext reads the request's runContext once per run. Numbers
// stay json.Number so bound values reach the platform unchanged.
func decodeRunContext(raw json.RawMessage) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, invalid("runContext is not valid JSON.")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, invalid("runContext must be a JSON object.")
	}
	return m, nil
}

// outgoingArgs are a call's arguments as they leave runnel: the spec's
// ephemeral arguments removed, then its bindings applied. Both happen
// after the permission decision, which saw what the model wrote.
func outgoingArgs(input json.RawMessage, spec *runnel.ToolSpec, runContext map[string]any) (json.RawMessage, error) {
	input, err := withoutArgs(input, spec.EphemeralArgs)
	if err != nil {
		return nil, err
	}
	return applyBindings(input, spec.ContextBindings, runContext)
}

// withoutArgs removes the named top-level members of the arguments.
// Without names the arguments pass through byte for byte.
func withoutArgs(input json.RawMessage, names []string) (json.RawMessage, error) {
	if len(names) == 0 || len(bytes.TrimSpace(input)) == 0 {
		return input, nil
	}
	var args map[string]json.RawMessage
	if err := json.Unmarshal(input, &args); err != nil || args == nil {
		return nil, errors.New("its arguments are not a JSON object")
	}
	removed := false
	for _, n := range names {
		if _, ok := args[n]; ok {
			delete(args, n)
			removed = true
		}
	}
	if !removed {
		return input, nil
	}
	return json.Marshal(args)
}

// applyBindings sets each bound argument path to its runContext value,
// overriding whatever the model sent there (DESIGN §4.3): a bound field is
// the platform's to fill, never the model's. A binding whose value is
// missing from runContext removes the model's value and leaves the field
// absent, so the model still cannot fill it. Without bindings the
// arguments pass through byte for byte.
func applyBindings(input json.RawMessage, bindings map[string]string, runContext map[string]any) (json.RawMessage, error) {
	if len(input) == 0 {
		input = json.RawMessage(`{}`)
	}
	if len(bindings) == 0 {
		return input, nil
	}
	var args map[string]any
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.UseNumber()
	if err := dec.Decode(&args); err != nil || args == nil {
		return nil, errors.New("its arguments are not a JSON object")
	}
	paths := make([]string, 0, len(bindings))
	for p := range bindings {
		paths = append(paths, p)
	}
	sort.Strings(paths) // a stable order when one binding nests in another
	for _, p := range paths {
		ref, ok := strings.CutPrefix(bindings[p], ctxPrefix)
		if !ok {
			continue
		}
		v, ok := lookup(runContext, ref)
		if !ok {
			deletePath(args, p)
			continue
		}
		if !setPath(args, p, v) {
			return nil, errors.New("a contextBindings path is not a safe dotted argument path")
		}
	}
	return json.Marshal(args)
}

// lookup reads the value at a dotted path. Only safe segments are
// followed, so a crafted path reads nothing a JavaScript prototype holds.
func lookup(m map[string]any, dotted string) (any, bool) {
	if !safePath(dotted) {
		return nil, false
	}
	var cur any = m
	for _, key := range strings.Split(dotted, ".") {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = obj[key]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// setPath sets args at a dotted path, making objects on the way. Segments
// that mean something to JavaScript object prototypes are refused, since
// the platform on the other side may well be JavaScript.
func setPath(args map[string]any, dotted string, v any) bool {
	if !safePath(dotted) {
		return false
	}
	keys := strings.Split(dotted, ".")
	cur := args
	for _, k := range keys[:len(keys)-1] {
		next, ok := cur[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			cur[k] = next
		}
		cur = next
	}
	cur[keys[len(keys)-1]] = v
	return true
}

// deletePath removes the value at a dotted path, if there is one.
func deletePath(args map[string]any, dotted string) {
	if !safePath(dotted) {
		return
	}
	keys := strings.Split(dotted, ".")
	cur := args
	for _, k := range keys[:len(keys)-1] {
		next, ok := cur[k].(map[string]any)
		if !ok {
			return
		}
		cur = next
	}
	delete(cur, keys[len(keys)-1])
}

// deepMerge lays overlay over base: two objects at one key merge, anything
// else is replaced by the overlay's value. Keys that mean something to
// JavaScript object prototypes are skipped.
func deepMerge(base, overlay map[string]any) {
	for k, v := range overlay {
		if protoKey(k) {
			continue
		}
		if sub, ok := v.(map[string]any); ok {
			if dst, ok := base[k].(map[string]any); ok {
				deepMerge(dst, sub)
				continue
			}
			copied := map[string]any{}
			deepMerge(copied, sub)
			base[k] = copied
			continue
		}
		base[k] = v
	}
}

func protoKey(k string) bool { return k == "__proto__" || k == "constructor" || k == "prototype" }

func safeSegment(k string) bool { return k != "" && !protoKey(k) }

func safePath(dotted string) bool {
	for _, k := range strings.Split(dotted, ".") {
		if !safeSegment(k) {
			return false
		}
	}
	return true
}
