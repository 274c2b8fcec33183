// Package provider holds what every model adapter shares: the request a
// harness sends, the chunks a stream yields, the response it ends with, and
// the retry and deadline policy wrapped around any adapter.
//
// An adapter (internal/provider/openai, internal/provider/anthropic)
// converts runnel Messages and Blocks to its API's format and streams the
// answer back:
//
//	resp, err := m.Stream(ctx, &provider.Request{Model: "gpt-5", Messages: msgs}, func(c provider.Chunk) {
//		if c.Kind == provider.ChunkText { fmt.Print(c.Text) }
//	})
package provider

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/runnel/runnel"
)

// Request is one model call.
type Request struct {
	// Model is the model id without any provider prefix.
	Model string
	// System is the whole system prompt.
	System string
	// Messages is the conversation; system-role messages are already folded
	// into System.
	Messages  []runnel.Message
	Tools     []Tool
	MaxTokens int
}

// Tool is a function the model may call.
type Tool struct {
	Name        string
	Description string
	// Schema is a JSON Schema object for the arguments.
	Schema json.RawMessage
}

// ChunkKind names what a Chunk carries.
type ChunkKind int

// The chunk kinds, in the order a stream may yield them per content part.
const (
	// ChunkText is a piece of visible assistant text.
	ChunkText ChunkKind = iota + 1
	// ChunkReasoning is a piece of reasoning or thinking text.
	ChunkReasoning
	// ChunkToolCall starts tool call number Index with ToolCallID and ToolName.
	ChunkToolCall
	// ChunkToolArgs is a piece of tool call Index's JSON arguments.
	ChunkToolArgs
)

// Chunk is one streamed piece of a model's answer.
type Chunk struct {
	Kind ChunkKind
	Text string
	// Index identifies the tool call within the step, for ChunkToolCall and
	// ChunkToolArgs.
	Index      int
	ToolCallID string
	ToolName   string
}

// Response is a finished model call.
type Response struct {
	// Content holds the assistant's blocks in order: reasoning, text and
	// tool_call blocks (with complete JSON Input).
	Content    []runnel.Block
	Usage      runnel.Usage
	StopReason string
}

// Model streams one model call. Stream calls emit for every chunk, in
// order, from the calling goroutine, and returns the assembled response.
type Model interface {
	Stream(ctx context.Context, req *Request, emit func(Chunk)) (*Response, error)
}

// Config is what an adapter needs to reach its API.
type Config struct {
	// BaseURL overrides the API's default base URL.
	BaseURL    string
	APIKey     string
	APIVersion string
	Headers    map[string]string
	// HTTPClient is used for every request; nil means a client with no
	// overall timeout (deadlines come from the context and Policy).
	HTTPClient *http.Client
}

// Policy is the retry and deadline policy WithPolicy wraps around a Model.
// A zero field means the documented default.
type Policy struct {
	// Attempts is the total number of tries, the first included (default 3).
	// A retry happens only before any chunk was emitted.
	Attempts int
	// BaseBackoff is the first retry's wait, doubled each retry (default 500ms).
	BaseBackoff time.Duration
	// MaxBackoff caps one wait, Retry-After included (default 30s).
	MaxBackoff time.Duration
	// FirstTokenTimeout bounds the wait for the first chunk (default:
	// IdleTimeout, so a silent model never hangs a run).
	FirstTokenTimeout time.Duration
	// IdleTimeout bounds the silence between chunks (default: none).
	IdleTimeout time.Duration
}

// Error is a failed model call as an adapter reports it, so WithPolicy can
// decide whether to retry without knowing the vendor SDK.
type Error struct {
	// Status is the HTTP status, or 0 when no response arrived.
	Status int
	// RetryAfter is the server's Retry-After, if it sent one.
	RetryAfter time.Duration
	// Retryable marks 429, 5xx and connection failures.
	Retryable bool
	// Message is a sentence without secrets, fit for the caller.
	Message string
	Err     error
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Err }
