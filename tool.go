package runnel

import (
	"bytes"
	"encoding/json"

	jsonv2 "github.com/go-json-experiment/json"
)

// ToolKind says who executes a custom tool (DESIGN §4.1).
type ToolKind string

// The custom tool kinds. An empty kind means callback.
const (
	ToolKindCallback ToolKind = "callback"
	ToolKindClient   ToolKind = "client"
	ToolKindCode     ToolKind = "code"
)

// permissiveSchema is the input schema of a tool that declares none: an
// object that accepts anything, never an empty advertisement.
const permissiveSchema = `{"type":"object","properties":{},"additionalProperties":true}`

// PermissiveSchema returns a fresh copy of the schema used when a tool
// declares none.
func PermissiveSchema() json.RawMessage { return json.RawMessage(permissiveSchema) }

// ToolSpec is a custom tool the platform declares (DESIGN §4).
type ToolSpec struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// InputSchema is read from inputSchema, falling back to input_schema;
	// with neither it is PermissiveSchema.
	InputSchema     json.RawMessage   `json:"inputSchema,omitempty"`
	Kind            ToolKind          `json:"kind,omitempty"`
	CallRef         string            `json:"callRef,omitempty"`
	Call            *DirectCall       `json:"call,omitempty"`
	ContextBindings map[string]string `json:"contextBindings,omitempty"`
	// EphemeralArgs are top-level argument names removed before a call
	// leaves runnel: the permission decision and the interaction see them,
	// the platform does not.
	EphemeralArgs []string        `json:"ephemeralArgs,omitempty"`
	TimeoutMs     int64           `json:"timeoutMs,omitempty"`
	Render        json.RawMessage `json:"render,omitempty"`
	ReadOnly      *bool           `json:"readOnly,omitempty"`
	Permission    string          `json:"permission,omitempty"`
}

// UnmarshalJSON reads the schema from inputSchema or input_schema.
func (t *ToolSpec) UnmarshalJSON(data []byte) error {
	type plain ToolSpec
	var aux struct {
		plain
		SnakeSchema json.RawMessage `json:"input_schema"`
	}
	if err := jsonv2.Unmarshal(data, &aux); err != nil {
		return err
	}
	*t = ToolSpec(aux.plain)
	if isNull(t.InputSchema) {
		t.InputSchema = aux.SnakeSchema
	}
	if isNull(t.InputSchema) {
		t.InputSchema = PermissiveSchema()
	}
	return nil
}

// EffectiveKind is the spec's kind with the callback default applied.
func (t *ToolSpec) EffectiveKind() ToolKind {
	if t.Kind == "" {
		return ToolKindCallback
	}
	return t.Kind
}

// DirectCall describes a callback tool executed by calling the platform API
// directly (DESIGN §4.3).
type DirectCall struct {
	Method   string            `json:"method"`
	Path     string            `json:"path"`
	Body     json.RawMessage   `json:"body,omitempty"`
	Context  map[string]string `json:"context,omitempty"`
	ArgsInto string            `json:"argsInto,omitempty"`
}

// UnmarshalJSON accepts args_into as well as argsInto.
func (d *DirectCall) UnmarshalJSON(data []byte) error {
	type plain DirectCall
	var aux struct {
		plain
		SnakeArgsInto string `json:"args_into"`
	}
	if err := jsonv2.Unmarshal(data, &aux); err != nil {
		return err
	}
	*d = DirectCall(aux.plain)
	if d.ArgsInto == "" {
		d.ArgsInto = aux.SnakeArgsInto
	}
	return nil
}

func isNull(raw json.RawMessage) bool {
	r := bytes.TrimSpace(raw)
	return len(r) == 0 || bytes.Equal(r, []byte("null"))
}
