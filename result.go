package runnel

import "encoding/json"

// Status is how a run ended.
type Status string

// The run statuses of DESIGN §3.2.
const (
	StatusCompleted Status = "completed"
	StatusPaused    Status = "paused"
	StatusFailed    Status = "failed"
	StatusCancelled Status = "cancelled"
)

// Stop reasons carried by the done event and the result.
const (
	StopEndTurn   = "end_turn"
	StopMaxSteps  = "max_steps"
	StopPaused    = "paused"
	StopCancelled = "cancelled"
	StopError     = "error"
)

// Result is what a run ends with (DESIGN §3.2).
type Result struct {
	OK     bool   `json:"ok"`
	Status Status `json:"status"`
	Output string `json:"output"`
	// Messages holds what this turn added, so a caller can append it to its
	// history and send it back.
	Messages     []Message     `json:"messages"`
	Events       []Event       `json:"events,omitempty"`
	Usage        Usage         `json:"usage"`
	StopReason   string        `json:"stopReason,omitempty"`
	Interactions []Interaction `json:"interactions"`
	// Notices are sentences about things the caller should know that did
	// not fail the run, such as an MCP server that could not be reached.
	Notices      []string      `json:"notices,omitempty"`
	Capabilities *Capabilities `json:"capabilities,omitempty"`
	SessionID    string        `json:"sessionId,omitempty"`
	TurnID       string        `json:"turnId,omitempty"`
	Model        string        `json:"model,omitempty"`
	TraceID      string        `json:"traceId,omitempty"`
	RequestID    string        `json:"requestId,omitempty"`
	Error        string        `json:"error,omitempty"`
	ErrorCode    ErrorCode     `json:"errorCode,omitempty"`
}

// Usage counts tokens and cost.
type Usage struct {
	Input  int64   `json:"input"`
	Output int64   `json:"output"`
	Total  int64   `json:"total"`
	Cost   float64 `json:"cost"`
}

// Add accumulates u2 into u.
func (u *Usage) Add(u2 Usage) {
	u.Input += u2.Input
	u.Output += u2.Output
	u.Total += u2.Total
	u.Cost += u2.Cost
}

// InteractionKind says who must answer an interaction.
type InteractionKind string

// The interaction kinds.
const (
	InteractionApproval   InteractionKind = "user_approval"
	InteractionClientTool InteractionKind = "client_tool"
)

// Interaction is something a paused run waits for: a person's approval or
// a browser's client-tool output.
type Interaction struct {
	ID         string          `json:"id"`
	Kind       InteractionKind `json:"kind"`
	ToolCallID string          `json:"toolCallId"`
	ToolName   string          `json:"toolName"`
	Input      json.RawMessage `json:"input"`
	Options    []string        `json:"options,omitempty"`
	Render     json.RawMessage `json:"render,omitempty"`
	Signature  string          `json:"signature,omitempty"`
	// ToolCall describes the call for a frontend that draws it (Agenta's):
	// its id, a title, the arguments as the model wrote them, and the
	// name a permission rule knows it by.
	ToolCall *InteractionToolCall `json:"toolCall,omitempty"`
}

// InteractionToolCall is the call an approval asks about, as Agenta's
// frontend reads it.
type InteractionToolCall struct {
	ToolCallID   string          `json:"toolCallId"`
	Title        string          `json:"title"`
	RawInput     json.RawMessage `json:"rawInput"`
	ResolvedName string          `json:"resolvedName"`
}

// InteractionAnswer is an answer a resume consumed: the
// interaction_response event, so a platform can settle the request it
// showed.
type InteractionAnswer struct {
	ID         string
	Kind       InteractionKind
	ToolCallID string
	Approved   bool
	Reason     string
}

// Capabilities are a harness's feature flags, as the platform reads them.
type Capabilities struct {
	TextMessages     bool `json:"textMessages"`
	Images           bool `json:"images"`
	FileAttachments  bool `json:"fileAttachments"`
	McpTools         bool `json:"mcpTools"`
	ToolCalls        bool `json:"toolCalls"`
	Reasoning        bool `json:"reasoning"`
	PlanMode         bool `json:"planMode"`
	Permissions      bool `json:"permissions"`
	Usage            bool `json:"usage"`
	StreamingDeltas  bool `json:"streamingDeltas"`
	SessionLifecycle bool `json:"sessionLifecycle"`
}
