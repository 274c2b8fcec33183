package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// The Gemini API (generativelanguage.googleapis.com): the model and the
// method are in the path, POST /v1beta/models/{model}:{method}, and
// streamGenerateContent?alt=sse streams GenerateContentResponse chunks as
// unnamed SSE events. The request fields are read in both of the spellings
// the API accepts (camelCase and snake_case).

// geminiMethod is what a Gemini path asks for.
type geminiMethod struct {
	model string
	// action is generateContent, streamGenerateContent or countTokens.
	action string
	// sse is alt=sse on a streamGenerateContent: without it the chunks come
	// as one JSON array.
	sse bool
}

// parseGeminiCall splits the last path segment, "{model}:{action}".
func parseGeminiCall(segment, alt string) (geminiMethod, bool) {
	i := strings.LastIndexByte(segment, ':')
	if i <= 0 {
		return geminiMethod{}, false
	}
	m := geminiMethod{model: segment[:i], action: segment[i+1:]}
	switch m.action {
	case "generateContent", "countTokens":
	case "streamGenerateContent":
		m.sse = alt == "sse"
	default:
		return geminiMethod{}, false
	}
	return m, true
}

type geminiRequest struct {
	Contents               []geminiContent `json:"contents"`
	SystemInstruction      *geminiContent  `json:"systemInstruction"`
	SystemInstructionSnake *geminiContent  `json:"system_instruction"`
	Tools                  []struct {
		FunctionDeclarations      []geminiDeclaration `json:"functionDeclarations"`
		FunctionDeclarationsSnake []geminiDeclaration `json:"function_declarations"`
	} `json:"tools"`
}

type geminiDeclaration struct {
	Name string `json:"name"`
}

type geminiContent struct {
	Role  string       `json:"role"`
	Parts []geminiPart `json:"parts"`
}

type geminiPart struct {
	Text                  string          `json:"text"`
	Thought               bool            `json:"thought"`
	FunctionCall          *geminiCall     `json:"functionCall"`
	FunctionCallSnake     *geminiCall     `json:"function_call"`
	FunctionResponse      *geminiResponse `json:"functionResponse"`
	FunctionResponseSnake *geminiResponse `json:"function_response"`
}

func (p geminiPart) call() *geminiCall {
	if p.FunctionCall != nil {
		return p.FunctionCall
	}
	return p.FunctionCallSnake
}

func (p geminiPart) response() *geminiResponse {
	if p.FunctionResponse != nil {
		return p.FunctionResponse
	}
	return p.FunctionResponseSnake
}

type geminiCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

type geminiResponse struct {
	ID       string          `json:"id"`
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

// normalizeGemini reads a GenerateContentRequest. The model and whether it
// streams are in the path; the handler sets them.
func normalizeGemini(body []byte) (Conversation, error) {
	var req geminiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return Conversation{}, fmt.Errorf("gemini request: %w", err)
	}
	c := Conversation{API: APIGemini}
	sys := req.SystemInstruction
	if sys == nil {
		sys = req.SystemInstructionSnake
	}
	if sys != nil {
		var texts []string
		for _, p := range sys.Parts {
			if p.Text != "" {
				texts = append(texts, p.Text)
			}
		}
		c.addSystem(strings.Join(texts, "\n"))
	}
	for _, content := range req.Contents {
		switch content.Role {
		case "model":
			c.addGeminiModel(content.Parts)
		default: // "user", the legacy "function", and no role at all
			c.addGeminiUser(content.Parts)
		}
	}
	for _, t := range req.Tools {
		for _, d := range append(t.FunctionDeclarations, t.FunctionDeclarationsSnake...) {
			if d.Name != "" {
				c.Tools = append(c.Tools, d.Name)
			}
		}
	}
	return c, nil
}

func (c *Conversation) addGeminiModel(parts []geminiPart) {
	c.open(RoleAssistant)
	for _, p := range parts {
		switch {
		case p.call() != nil:
			fc := p.call()
			c.addToolCall(ToolCall{ID: fc.ID, Name: fc.Name, Arguments: rawArguments(fc.Args)})
		case p.Thought:
			c.addReasoning(p.Text)
		case p.Text != "":
			c.addAssistantText(p.Text)
		}
	}
}

// addGeminiUser splits a user turn into its function responses (a tool
// message) followed by its text (a user message), as for Anthropic.
func (c *Conversation) addGeminiUser(parts []geminiPart) {
	var text string
	results := 0
	for _, p := range parts {
		if fr := p.response(); fr != nil {
			c.addToolResult(geminiToolResult(fr))
			results++
			continue
		}
		if !p.Thought {
			text = joinText(text, p.Text)
		}
	}
	if results == 0 || text != "" {
		c.addUser(text)
	}
}

// geminiToolResult reads a functionResponse. The API leaves the response
// object free; Gemini CLI sends {"output": …} or {"error": …}, so a string
// output or error is the result's text and anything else its compact JSON.
// A response without an id answers by name, as the API's own examples do.
func geminiToolResult(fr *geminiResponse) ToolResult {
	tr := ToolResult{CallID: fr.ID}
	if tr.CallID == "" {
		tr.CallID = fr.Name
	}
	var fields struct {
		Output *string `json:"output"`
		Error  *string `json:"error"`
	}
	switch {
	case json.Unmarshal(fr.Response, &fields) == nil && fields.Output != nil:
		tr.Text = *fields.Output
	case fields.Error != nil:
		tr.Text, tr.IsError = *fields.Error, true
	default:
		tr.Text = string(compactJSON(bytes.TrimSpace(fr.Response)))
	}
	return tr
}

// geminiChunk is one GenerateContentResponse carrying parts; the last one of
// a reply carries the finish reason and the usage.
func (o outcome) geminiChunk(parts []obj, last bool) obj {
	candidate := obj{{"content", obj{{"role", "model"}, {"parts", parts}}}}
	if last {
		candidate = append(candidate, kv{"finishReason", "STOP"})
	}
	candidate = append(candidate, kv{"index", 0})
	chunk := obj{{"candidates", []obj{candidate}}}
	if last {
		chunk = append(chunk, kv{"usageMetadata", obj{
			{"promptTokenCount", o.usage.Input},
			{"candidatesTokenCount", o.usage.Output},
			{"totalTokenCount", o.usage.Input + o.usage.Output},
		}})
	}
	return append(chunk, kv{"modelVersion", o.model}, kv{"responseId", o.id("")})
}

// geminiCallPart is a functionCall part. Gemini sends a call whole, never
// in pieces, with args as an object. The id is optional in the API; sending
// it lets a client answer by id, and Gemini CLI then uses it as its own.
func geminiCallPart(tc ToolCall) obj {
	return obj{{"functionCall", obj{{"id", tc.ID}, {"name", tc.Name}, {"args", objectArguments(tc.Arguments)}}}}
}

// geminiParts lists the reply's parts as chunks would carry them: thought
// pieces, text pieces, then one part per call.
func (o outcome) geminiParts(streamed bool) [][]obj {
	var chunks [][]obj
	split := func(s string) []string {
		if !streamed {
			if s == "" {
				return nil
			}
			return []string{s}
		}
		return o.pieces(s)
	}
	for _, p := range split(o.reasoning) {
		chunks = append(chunks, []obj{{{"text", p}, {"thought", true}}})
	}
	for _, p := range split(o.text) {
		chunks = append(chunks, []obj{{{"text", p}}})
	}
	for _, tc := range o.calls {
		chunks = append(chunks, []obj{geminiCallPart(tc)})
	}
	if len(chunks) == 0 {
		chunks = append(chunks, []obj{{{"text", ""}}})
	}
	return chunks
}

// geminiStream is the chunk sequence of a streamed reply, one SSE event each.
func (o outcome) geminiStream() []sseEvent {
	chunks := o.geminiParts(true)
	events := make([]sseEvent, 0, len(chunks))
	for i, parts := range chunks {
		events = append(events, sseEvent{data: mustJSON(o.geminiChunk(parts, i == len(chunks)-1))})
	}
	return events
}

// geminiArray is a streamGenerateContent reply without alt=sse: the same
// chunks as one JSON array.
func (o outcome) geminiArray() []byte {
	chunks := o.geminiParts(true)
	all := make([]obj, 0, len(chunks))
	for i, parts := range chunks {
		all = append(all, o.geminiChunk(parts, i == len(chunks)-1))
	}
	return mustJSON(all)
}

// geminiJSON is the non-streaming GenerateContentResponse: every part in one
// candidate.
func (o outcome) geminiJSON() []byte {
	var parts []obj
	for _, c := range o.geminiParts(false) {
		parts = append(parts, c...)
	}
	return mustJSON(o.geminiChunk(parts, true))
}

// geminiError is the Gemini (google.rpc.Status) error body.
func geminiError(status int, message string) []byte {
	code := "INTERNAL"
	switch status {
	case 400:
		code = "INVALID_ARGUMENT"
	case 401:
		code = "UNAUTHENTICATED"
	case 403:
		code = "PERMISSION_DENIED"
	case 404:
		code = "NOT_FOUND"
	case 409:
		code = "ABORTED"
	case 413:
		code = "INVALID_ARGUMENT"
	case 429:
		code = "RESOURCE_EXHAUSTED"
	case 499:
		code = "CANCELLED"
	case 501:
		code = "UNIMPLEMENTED"
	case 503:
		code = "UNAVAILABLE"
	case 504:
		code = "DEADLINE_EXCEEDED"
	}
	return mustJSON(obj{{"error", obj{{"code", status}, {"message", message}, {"status", code}}}})
}
