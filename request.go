// Package runnel holds the domain vocabulary of the runnel agent runner: the
// run request a platform posts, the conversation it carries, the events a run
// streams and the result it ends with. It imports only the standard library;
// every subpackage adapts one technology and speaks in these types.
//
// A run in one picture:
//
//	req := &runnel.RunRequest{Model: "openai/gpt-5", Messages: []runnel.Message{runnel.UserText("hi")}}
//	res := runner.Run(ctx, req, runnel.SinkFunc(func(e runnel.Event) { fmt.Println(e.Type) }))
//	fmt.Println(res.Status, res.Output)
package runnel

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// RunRequest is one stateless turn, as posted to POST /run (DESIGN §3.1).
// Unknown fields are ignored; field names match exactly (internal/server
// decodes with internal/strictjson, which also refuses a name given twice,
// or twice in different case, anywhere in the body). The types with their
// own UnmarshalJSON read their members with encoding/json/v2's exact
// matching for the same reason: a validator in front of runnel and runnel
// must read one request, not two.
type RunRequest struct {
	Harness  string            `json:"harness,omitempty"`
	Model    string            `json:"model,omitempty"`
	Provider string            `json:"provider,omitempty"`
	Endpoint *Endpoint         `json:"endpoint,omitempty"`
	Secrets  map[string]string `json:"secrets,omitempty"`
	// ModelConnection is Agenta v0.113's form of provider, endpoint and
	// secrets (DESIGN §3.7); when present it wins over them.
	ModelConnection *ModelConnection `json:"modelConnection,omitempty"`
	// ModelCapabilities says what the model accepts beyond text.
	ModelCapabilities  *ModelCapabilities `json:"modelCapabilities,omitempty"`
	Messages           []Message          `json:"messages,omitempty"`
	SystemPrompt       string             `json:"systemPrompt,omitempty"`
	AppendSystemPrompt string             `json:"appendSystemPrompt,omitempty"`
	AgentsMd           string             `json:"agentsMd,omitempty"`
	// Tools lists the builtin grants. Nil (absent) and empty ([]) differ:
	// absent grants the default set, [] grants none.
	Tools        []string      `json:"tools"`
	CustomTools  []ToolSpec    `json:"customTools,omitempty"`
	McpServers   []McpServer   `json:"mcpServers,omitempty"`
	ToolCallback *ToolCallback `json:"toolCallback,omitempty"`
	// Permissions is kept raw because a present-but-malformed value must
	// fail toward "ask" (DESIGN §5.1), which a strict decode would lose.
	Permissions       json.RawMessage    `json:"permissions,omitempty"`
	Sandbox           string             `json:"sandbox,omitempty"`
	SandboxPermission *SandboxPermission `json:"sandboxPermission,omitempty"`
	Skills            []Skill            `json:"skills,omitempty"`
	HarnessFiles      []File             `json:"harnessFiles,omitempty"`
	CodeMode          *CodeMode          `json:"codeMode,omitempty"`
	Limits            *Limits            `json:"limits,omitempty"`
	SessionID         string             `json:"sessionId,omitempty"`
	TurnID            string             `json:"turnId,omitempty"`
	ProjectID         string             `json:"projectId,omitempty"`
	Context           *TraceContext      `json:"context,omitempty"`
	Telemetry         json.RawMessage    `json:"telemetry,omitempty"`
	RunContext        json.RawMessage    `json:"runContext,omitempty"`
	// HarnessMode is an ACP agent's session mode (DESIGN §3.1); empty
	// means the mode that asks runnel's gate about every call.
	HarnessMode string `json:"harnessMode,omitempty"`
}

// Endpoint overrides where the provider is reached.
type Endpoint struct {
	BaseURL    string            `json:"baseUrl,omitempty"`
	APIVersion string            `json:"apiVersion,omitempty"`
	Region     string            `json:"region,omitempty"`
	Headers    map[string]string `json:"headers,omitempty"`
}

// ModelConnection is how a model is reached, as Agenta v0.113 sends it:
// the provider family, how it is deployed, where, and the credentials.
type ModelConnection struct {
	Provider   string    `json:"provider,omitempty"`
	Deployment string    `json:"deployment,omitempty"`
	Endpoint   *Endpoint `json:"endpoint,omitempty"`
	// CredentialMode is "env" (the credentials are in Credentials),
	// "runtime_provided" (the runner supplies them from its own
	// configuration) or "none".
	CredentialMode string       `json:"credentialMode,omitempty"`
	Credentials    []Credential `json:"credentials,omitempty"`
}

// The credential modes of a ModelConnection.
const (
	CredentialModeEnv             = "env"
	CredentialModeRuntimeProvided = "runtime_provided"
	CredentialModeNone            = "none"
)

// Credential is one secret value and where it goes: an environment
// variable name (Binding.Kind "environment") or an HTTP header
// ("header"). Its value is a secret of the run.
type Credential struct {
	Binding CredentialBinding `json:"binding"`
	Value   string            `json:"value"`
	Usage   string            `json:"usage,omitempty"`
}

// CredentialBinding names where a credential is put.
type CredentialBinding struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// The binding kinds of a Credential.
const (
	BindingEnvironment = "environment"
	BindingHeader      = "header"
)

// ModelCapabilities says what a model takes as input: "text", "image",
// "file", …
type ModelCapabilities struct {
	InputModalities []string `json:"inputModalities,omitempty"`
}

// ToolCallback is where callback tools are executed (DESIGN §4.2).
type ToolCallback struct {
	Endpoint      string `json:"endpoint"`
	Authorization string `json:"authorization,omitempty"`
}

// Limits tightens the server's limits for one run; it never loosens them.
type Limits struct {
	MaxSteps       int   `json:"maxSteps,omitempty"`
	TotalTimeoutMs int64 `json:"totalTimeoutMs,omitempty"`
	IdleTimeoutMs  int64 `json:"idleTimeoutMs,omitempty"`
}

// CodeMode switches on the list_mcp_tools / run_mcp_script tools (DESIGN §4.7).
type CodeMode struct {
	Enabled   bool  `json:"enabled,omitempty"`
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
}

// TraceContext carries W3C trace propagation headers.
type TraceContext struct {
	Propagation *struct {
		Traceparent string `json:"traceparent,omitempty"`
		Baggage     string `json:"baggage,omitempty"`
	} `json:"propagation,omitempty"`
}

// SandboxPermission declares the boundaries a run asks for (DESIGN §6).
type SandboxPermission struct {
	Network     *NetworkPolicy `json:"network,omitempty"`
	Filesystem  string         `json:"filesystem,omitempty"`
	Enforcement string         `json:"enforcement,omitempty"`
}

// NetworkPolicy is the network part of a SandboxPermission.
type NetworkPolicy struct {
	Mode      string   `json:"mode,omitempty"`
	Allowlist []string `json:"allowlist,omitempty"`
}

// File is written into the run's workspace before the run starts.
type File struct {
	Path       string `json:"path"`
	Content    string `json:"content"`
	Executable bool   `json:"executable,omitempty"`
}

// Skill is either a plain file ({path, content}) or a named skill with a
// body and files of its own, as platform catalogs send it.
type Skill struct {
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	Body        string `json:"body,omitempty"`
	Files       []File `json:"files,omitempty"`
	// DisableModelInvocation keeps the skill out of the model's automatic
	// choice; only an explicit request loads it.
	DisableModelInvocation bool `json:"disableModelInvocation,omitempty"`
	// AllowExecutableFiles lets the skill's files keep their executable bit.
	AllowExecutableFiles bool `json:"allowExecutableFiles,omitempty"`
	File
}

// McpServer is a user MCP server (DESIGN §4.6). Both the nested shape
// ({name, connection, policy}) and the older flat shape ({name, transport,
// url, headers, command, args}) decode into it.
type McpServer struct {
	Name       string         `json:"name"`
	Connection *McpConnection `json:"connection,omitempty"`
	Policy     *McpPolicy     `json:"policy,omitempty"`

	// The flat shape.
	Transport string            `json:"transport,omitempty"`
	URL       string            `json:"url,omitempty"`
	Headers   map[string]string `json:"headers,omitempty"`
	Command   string            `json:"command,omitempty"`
	Args      []string          `json:"args,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
}

// McpConnection says how an MCP server is reached. Credentials with
// binding kind "header" are sent as headers, like Headers, and are secrets
// of the run.
type McpConnection struct {
	Type        string            `json:"type,omitempty"`
	URL         string            `json:"url,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
	Credentials []Credential      `json:"credentials,omitempty"`
	Command     string            `json:"command,omitempty"`
	Args        []string          `json:"args,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
}

// McpPolicy filters a server's tools and sets its permission.
type McpPolicy struct {
	Tools *struct {
		Mode  string   `json:"mode,omitempty"`
		Names []string `json:"names,omitempty"`
	} `json:"tools,omitempty"`
	Permission string `json:"permission,omitempty"`
	// Required makes a server that cannot be reached fail the run, rather
	// than leave the model without its tools (with a notice).
	Required bool `json:"required,omitempty"`
}

// Role is who said a message.
type Role string

// The roles of a conversation.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one turn of the conversation. On the wire its content is a
// string or an array of blocks; in Go it is always blocks.
type Message struct {
	Role    Role    `json:"role"`
	Content []Block `json:"content"`
}

// UserText is a user message holding one text block.
func UserText(text string) Message {
	return Message{Role: RoleUser, Content: []Block{{Type: BlockText, Text: text}}}
}

// Text joins the message's text blocks.
func (m Message) Text() string {
	var b bytes.Buffer
	for _, bl := range m.Content {
		if bl.Type == BlockText {
			b.WriteString(bl.Text)
		}
	}
	return b.String()
}

// UnmarshalJSON accepts content as a string, null, or an array whose items
// are blocks or bare strings (see UnmarshalJSONFrom).
func (m *Message) UnmarshalJSON(data []byte) error {
	return jsonv2.Unmarshal(data, m)
}

// errContent is what a message whose content is neither a string nor an
// array of blocks is told.
var errContent = errors.New("message content must be a string or an array of blocks")

// UnmarshalJSONFrom reads a message from dec in one pass: the message,
// its content and its blocks come off the decoder's one reading of the
// bytes, so a long conversation is read once, not once per level (a
// request replaying 400 KB of history spent most of its decode reading the
// same strings again). encoding/json/v2 calls it for every Message it
// decodes; errors carry the decoder's position
// (messages[3].content[1].text).
func (m *Message) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	tok, err := dec.ReadToken()
	if err != nil {
		return err
	}
	*m = Message{}
	switch tok.Kind() {
	case 'n':
		return nil
	case '{':
	default:
		// As encoding/json/v2 words it for any struct: "must be an object, not a string".
		return &jsonv2.SemanticError{JSONKind: tok.Kind(), GoType: reflect.TypeFor[Message]()}
	}
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil {
			return err
		}
		switch name.String() {
		case "role":
			err = jsonv2.UnmarshalDecode(dec, &m.Role)
		case "content":
			m.Content, err = decodeContent(dec)
		default:
			err = dec.SkipValue()
		}
		if err != nil {
			return err
		}
	}
	_, err = dec.ReadToken()
	return err
}

// decodeContent reads a message's content: null, a string (one text
// block), or an array of blocks and bare strings.
func decodeContent(dec *jsontext.Decoder) ([]Block, error) {
	switch dec.PeekKind() {
	case 'n':
		_, err := dec.ReadToken()
		return nil, err
	case '"':
		var s string
		if err := jsonv2.UnmarshalDecode(dec, &s); err != nil {
			return nil, err
		}
		return []Block{{Type: BlockText, Text: s}}, nil
	case '[':
	default:
		if err := dec.SkipValue(); err != nil {
			return nil, err
		}
		return nil, &jsonv2.SemanticError{JSONPointer: dec.StackPointer(), Err: errContent}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	var blocks []Block
	for dec.PeekKind() != ']' {
		var b Block
		if dec.PeekKind() == '"' {
			b.Type = BlockText
			if err := jsonv2.UnmarshalDecode(dec, &b.Text); err != nil {
				return nil, err
			}
		} else if err := jsonv2.UnmarshalDecode(dec, &b); err != nil {
			return nil, err
		}
		blocks = append(blocks, b)
	}
	_, err := dec.ReadToken()
	return blocks, err
}

// BlockType names what a Block holds.
type BlockType string

// The block types of DESIGN §3.1. BlockReasoning carries a model's visible
// reasoning (and its provider signature) so it can be replayed.
const (
	BlockText       BlockType = "text"
	BlockImage      BlockType = "image"
	BlockResource   BlockType = "resource"
	BlockToolCall   BlockType = "tool_call"
	BlockToolResult BlockType = "tool_result"
	BlockReasoning  BlockType = "reasoning"
	// BlockAttachment is a file the platform stores, named by its id
	// (Agenta v0.113): runnel resolves it into an image or resource block,
	// or says why it could not.
	BlockAttachment BlockType = "attachment"
)

// Result block kinds: the explicit discriminator of a tool_result block.
const (
	ResultKindApproval     = "approval"
	ResultKindClientOutput = "client_output"
)

// Block is one piece of a message.
type Block struct {
	Type       BlockType       `json:"type"`
	Text       string          `json:"text,omitempty"`
	Data       string          `json:"data,omitempty"`
	MimeType   string          `json:"mimeType,omitempty"`
	URI        string          `json:"uri,omitempty"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	ToolName   string          `json:"toolName,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	Output     json.RawMessage `json:"output,omitempty"`
	IsError    bool            `json:"isError,omitempty"`
	Kind       string          `json:"kind,omitempty"`
	// Signature is the provider's opaque proof on a reasoning block.
	Signature string `json:"signature,omitempty"`
	// AttachmentID, Filename and Size describe a file: an attachment block
	// the platform stores, or the name of a resource's data.
	AttachmentID string `json:"attachmentId,omitempty"`
	Filename     string `json:"filename,omitempty"`
	Size         int64  `json:"size,omitempty"`
}

// OutputText is a tool result's output as the text a model reads: a JSON
// string is unquoted, anything else is its JSON text.
func (b Block) OutputText() string {
	o := bytes.TrimSpace(b.Output)
	if len(o) > 0 && o[0] == '"' {
		// encoding/json/v2 unquotes several times faster (this runs for
		// every replayed result a run encodes); it refuses invalid UTF-8,
		// which encoding/json replaces as before.
		var s string
		if jsonv2.Unmarshal(o, &s) == nil || json.Unmarshal(o, &s) == nil {
			return s
		}
	}
	return string(o)
}

// OutputHasPrefix is strings.HasPrefix(b.OutputText(), prefix), without
// decoding a whole JSON string when its first bytes already say no: a
// long conversation holds many results, and each is classified on every
// request. A prefix that begins with a quote is always decoded for.
func (b Block) OutputHasPrefix(prefix string) bool {
	o := bytes.TrimSpace(b.Output)
	if len(o) == 0 || o[0] != '"' {
		return bytes.HasPrefix(o, []byte(prefix))
	}
	head := o[1:min(len(o), len(prefix)+1)]
	if !strings.HasPrefix(prefix, `"`) && bytes.IndexByte(head, '\\') < 0 && !bytes.HasPrefix(o[1:], []byte(prefix)) {
		// The first bytes decode to themselves, and they differ.
		return false
	}
	return strings.HasPrefix(b.OutputText(), prefix)
}

// TextOutput encodes s as a tool result output.
func TextOutput(s string) json.RawMessage {
	b, _ := json.Marshal(s) // a string always marshals
	return b
}
