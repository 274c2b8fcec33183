package harness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/runnel/runnel/internal/strictjson"
)

// CheckArgs turns a call's raw arguments into a JSON object, or returns the
// sentence that tells the model what to fix. Empty and null arguments mean
// "no arguments": several APIs send them for tools without parameters.
//
// The arguments are read strictly (internal/strictjson): a member given
// twice, or twice in different case, is refused, because the permission
// gate reads one member exactly while a tool's own decoder may take the
// last one or ignore case ({"command":"echo hi","COMMAND":"rm -rf ~"}).
// What passes can be read only one way, so the gate and the tool see the
// same call.
func CheckArgs(name string, raw json.RawMessage, schema json.RawMessage) (json.RawMessage, string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = json.RawMessage(`{}`)
	}
	if err := strictjson.Check(raw); err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) && se.Syntax {
			return nil, fmt.Sprintf("Tool '%s' arguments are not valid JSON. Retry the tool call with the arguments as one JSON object.", name)
		}
		return nil, fmt.Sprintf("Tool '%s' arguments cannot be read one way only: the arguments %s. Retry the tool call with each argument named once, in the case the tool's schema uses.", name, err)
	}
	var args map[string]json.RawMessage
	if err := json.Unmarshal(raw, &args); err != nil {
		return nil, fmt.Sprintf("Tool '%s' arguments must be a JSON object, not %s. Retry the tool call with the arguments as one JSON object.", name, jsonKind(raw))
	}
	if err := strictjson.CheckNames(raw, schemaProperties(schema)); err != nil {
		return nil, fmt.Sprintf("Tool '%s' arguments cannot be read one way only: the arguments %s. Retry the tool call with the argument names the schema gives.", name, err)
	}
	if missing := missingRequired(schema, args, ""); len(missing) > 0 {
		return nil, fmt.Sprintf("Tool '%s' missing required argument(s): %s. Retry the tool call with those argument fields populated.",
			name, strings.Join(missing, ", "))
	}
	return raw, ""
}

// schemaNode is the part of a JSON Schema the required-argument check reads.
type schemaNode struct {
	Required   []string                   `json:"required"`
	Properties map[string]json.RawMessage `json:"properties"`
}

// missingRequired lists the required fields absent from args, descending
// into nested objects whose schema has its own required list, as dotted
// paths ("b.c"). A null value counts as absent: a model that sends null has
// not populated the field. A schema that cannot be read requires nothing,
// so a sloppy schema never blocks a call.
func missingRequired(schema json.RawMessage, args map[string]json.RawMessage, prefix string) []string {
	var node schemaNode
	if len(schema) == 0 || json.Unmarshal(schema, &node) != nil {
		return nil
	}
	var missing []string
	for _, key := range node.Required {
		v, ok := args[key]
		if !ok || isNull(v) {
			missing = append(missing, prefix+key)
		}
	}
	// Present nested objects are checked too, required or not: a partly
	// filled optional object still has to be complete.
	keys := make([]string, 0, len(node.Properties))
	for k := range node.Properties {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		v, ok := args[key]
		if !ok {
			continue
		}
		var sub map[string]json.RawMessage
		if json.Unmarshal(v, &sub) != nil {
			continue
		}
		missing = append(missing, missingRequired(node.Properties[key], sub, prefix+key+".")...)
	}
	return missing
}

// schemaProperties are the top-level property names a schema declares.
func schemaProperties(schema json.RawMessage) []string {
	var node schemaNode
	if len(schema) == 0 || json.Unmarshal(schema, &node) != nil {
		return nil
	}
	names := make([]string, 0, len(node.Properties))
	for n := range node.Properties {
		names = append(names, n)
	}
	return names
}

func isNull(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) == 0 || bytes.Equal(v, []byte("null"))
}

func jsonKind(raw json.RawMessage) string {
	switch raw[0] {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	default:
		return "a number"
	}
}
