package uistream

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"slices"

	"github.com/runnel/runnel"
)

// Chunk is one UI Message Stream chunk. MarshalJSON writes only the keys
// of its type that are set; Stream never sets a key its profile's client
// would reject.
type Chunk struct {
	Type         string          `json:"type"`
	ID           string          `json:"id,omitempty"`
	Delta        string          `json:"delta,omitempty"`
	MessageID    string          `json:"messageId,omitempty"`
	ToolCallID   string          `json:"toolCallId,omitempty"`
	ToolName     string          `json:"toolName,omitempty"`
	Input        json.RawMessage `json:"input,omitempty"`
	Output       json.RawMessage `json:"output,omitempty"`
	ErrorText    string          `json:"errorText,omitempty"`
	Dynamic      bool            `json:"dynamic,omitempty"`
	ApprovalID   string          `json:"approvalId,omitempty"`
	Signature    string          `json:"signature,omitempty"`
	FinishReason string          `json:"finishReason,omitempty"`
	Data         json.RawMessage `json:"data,omitempty"`
	Transient    bool            `json:"transient,omitempty"`
}

// Options configure a Stream.
type Options struct {
	Profile Profile
	// MessageID is the id of the assistant message the answer writes: the
	// continued message's, or a new one.
	MessageID string
	// Conversation is what the request carried: the tool calls the client
	// already shows (their results update them in place) and those of
	// earlier messages (which the client can no longer update).
	Conversation *Conversation
	// Static reports the tools the frontend declares, whose parts are
	// "tool-<name>"; every other tool is sent dynamic ("dynamic-tool").
	Static func(name string) bool
}

// Stream turns one run's events into chunks. It is not safe for
// concurrent use; the server calls it under its writer's lock.
type Stream struct {
	o Options
	// tools are the calls the client's message holds, by id.
	tools map[string]ToolRef
	// open are the text and reasoning parts started and not ended.
	open map[string]string
	// inStep is true between start-step and finish-step; afterResult is
	// true once a tool result arrived in the step, so the next model
	// output begins a new step.
	inStep, afterResult bool
	// failed is set once an error chunk went out.
	failed bool
	// settled are the client's calls this answer settled; reissued maps
	// a call an ACP agent made again after its approval, under an id of
	// its own, to the call the client shows, which its result settles.
	settled  map[string]bool
	reissued map[string]string
}

// NewStream returns a Stream for one answer.
func NewStream(o Options) *Stream {
	if o.Conversation == nil {
		o.Conversation = &Conversation{}
	}
	if o.Static == nil {
		o.Static = func(string) bool { return false }
	}
	s := &Stream{o: o, tools: map[string]ToolRef{}, open: map[string]string{},
		settled: map[string]bool{}, reissued: map[string]string{}}
	for id, t := range o.Conversation.Tools {
		s.tools[id] = t
	}
	return s
}

// Start is the stream's first chunks: start, with the message id (the
// continued message's, so the client keeps writing into it), then the
// denials the request answered: a declined call never runs, and an ACP
// agent, told of the denial, does not make it again, so nothing else
// would settle it.
func (s *Stream) Start() []Chunk {
	out := []Chunk{{Type: "start", MessageID: s.o.MessageID}}
	if !s.o.Profile.approvals() {
		return out // ai@5: the answer was the part's output
	}
	for _, id := range s.answered() {
		if !s.o.Conversation.Tools[id].Approved {
			s.settled[id] = true
			out = append(out, Chunk{Type: "tool-output-denied", ToolCallID: id})
		}
	}
	return out
}

// answered are the ids of the client's calls whose approval the request
// answers, in order.
func (s *Stream) answered() []string {
	var ids []string
	for _, id := range slices.Sorted(maps.Keys(s.o.Conversation.Tools)) {
		if s.o.Conversation.Tools[id].Answered {
			ids = append(ids, id)
		}
	}
	return ids
}

// Event returns the chunks for one run event, in order.
func (s *Stream) Event(e runnel.Event) []Chunk {
	var out []Chunk
	switch e.Type {
	case runnel.EventMessageStart, runnel.EventThoughtStart:
		out = s.step(out)
		out = s.openPart(out, e.Type == runnel.EventThoughtStart, e.ID)
	case runnel.EventMessageDelta, runnel.EventThoughtDelta:
		if e.Delta == "" {
			break
		}
		thought := e.Type == runnel.EventThoughtDelta
		if _, ok := s.open[e.ID]; !ok {
			out = s.step(out)
			out = s.openPart(out, thought, e.ID)
		}
		out = append(out, Chunk{Type: s.open[e.ID] + "-delta", ID: e.ID, Delta: e.Delta})
	case runnel.EventMessageEnd, runnel.EventThoughtEnd:
		if kind, ok := s.open[e.ID]; ok {
			delete(s.open, e.ID)
			out = append(out, Chunk{Type: kind + "-end", ID: e.ID})
		}
	case runnel.EventToolCall:
		out = s.toolCall(out, e.ID, e.Name, e.Input)
	case runnel.EventToolResult:
		out = s.toolResult(out, e)
	case runnel.EventInteractionRequest:
		out = s.interaction(out, e.Interaction)
	case runnel.EventUsage:
		if e.Usage != nil {
			out = append(out, s.data(DataUsage, "", e.Usage, true))
		}
	case runnel.EventNotice:
		out = append(out, s.data(DataNotice, "", struct {
			Text string `json:"text"`
		}{e.Text}, true))
	case runnel.EventError:
		out = s.fail(out, e.Message)
	}
	// interaction_response: the client knows its own answer; done: the
	// result ends the stream (Finish).
	return out
}

// Finish ends the stream for res: the parts and step still open are
// closed, a run that failed without an error event gets one, the result's
// facts go in a transient data part, then finish (with a finish reason
// where the profile has them).
func (s *Stream) Finish(res *runnel.Result) []Chunk {
	var out []Chunk
	for _, id := range slices.Sorted(maps.Keys(s.open)) {
		out = append(out, Chunk{Type: s.open[id] + "-end", ID: id})
	}
	clear(s.open)
	if s.inStep {
		out = append(out, Chunk{Type: "finish-step"})
		s.inStep = false
	}
	if res == nil {
		res = &runnel.Result{Status: runnel.StatusFailed, Error: "the run ended without a result"}
	}
	if res.Status != runnel.StatusPaused && s.o.Profile.approvals() {
		// An approved call the answer never ran (an agent that did not
		// make it again, a run that ended first) is settled, so the
		// client does not send the approval again and again.
		for _, id := range s.answered() {
			if !s.settled[id] {
				s.settled[id] = true
				out = append(out, Chunk{Type: "tool-output-error", ToolCallID: id,
					ErrorText: "The call was approved but did not run: the turn ended first.", Dynamic: s.tools[id].Dynamic})
			}
		}
	}
	if !res.OK && res.Error != "" {
		out = s.fail(out, res.Error)
	}
	out = append(out, s.data(DataResult, "", struct {
		OK         bool          `json:"ok"`
		Status     runnel.Status `json:"status"`
		StopReason string        `json:"stopReason,omitempty"`
		ErrorCode  string        `json:"errorCode,omitempty"`
		TraceID    string        `json:"traceId,omitempty"`
		RequestID  string        `json:"requestId,omitempty"`
	}{res.OK, res.Status, res.StopReason, string(res.ErrorCode), res.TraceID, res.RequestID}, true))
	f := Chunk{Type: "finish"}
	if s.o.Profile.finishReason() {
		f.FinishReason = finishReason(res)
	}
	return append(out, f)
}

// finishReason maps how the run ended onto the reasons every ai@6 and
// ai@7 client knows.
func finishReason(res *runnel.Result) string {
	switch {
	case res.Status == runnel.StatusPaused:
		return "tool-calls"
	case res.Status == runnel.StatusFailed:
		return "error"
	case res.Status == runnel.StatusCancelled:
		return "other"
	case res.StopReason == runnel.StopMaxSteps:
		return "length"
	}
	return "stop"
}

// step opens a step for model output: the first output of the answer, or
// the first after a tool result (the model was called again).
func (s *Stream) step(out []Chunk) []Chunk {
	if s.inStep && !s.afterResult {
		return out
	}
	if s.inStep {
		out = append(out, Chunk{Type: "finish-step"})
	}
	s.inStep, s.afterResult = true, false
	return append(out, Chunk{Type: "start-step"})
}

func (s *Stream) openPart(out []Chunk, thought bool, id string) []Chunk {
	if _, ok := s.open[id]; ok {
		return out
	}
	kind := "text"
	if thought {
		kind = "reasoning"
	}
	s.open[id] = kind
	return append(out, Chunk{Type: kind + "-start", ID: id})
}

// toolCall shows a call: a new one as tool-input-start and
// tool-input-available, one the answer already showed again with its new
// input. A call the client's message already holds (a resume settling it)
// and one of an earlier message send nothing: the client has it.
func (s *Stream) toolCall(out []Chunk, id, name string, input json.RawMessage) []Chunk {
	if s.o.Conversation.Earlier[id] {
		return out
	}
	if _, known := s.o.Conversation.Tools[id]; known {
		return out
	}
	t, shown := s.tools[id]
	if !shown && s.reissue(id, name, input) {
		return out
	}
	if !shown {
		out = s.step(out)
		t = ToolRef{Name: name, Dynamic: !s.o.Static(name)}
		s.tools[id] = t
		out = append(out, Chunk{Type: "tool-input-start", ToolCallID: id, ToolName: name, Dynamic: t.Dynamic})
	}
	return append(out, Chunk{Type: "tool-input-available", ToolCallID: id, ToolName: t.Name,
		Input: orEmptyObject(input), Dynamic: t.Dynamic})
}

// toolResult settles a call the client shows. Results of calls of earlier
// messages are not sent: the client cannot update those messages, and
// the conversation runnel reads next carries them anyway.
func (s *Stream) toolResult(out []Chunk, e runnel.Event) []Chunk {
	id := e.ID
	if x, ok := s.reissued[id]; ok {
		id = x
	}
	t, ok := s.tools[id]
	if !ok || s.settled[id] {
		return out
	}
	s.settled[id] = true
	if s.inStep {
		s.afterResult = true
	}
	switch {
	case e.Denied && s.o.Profile.approvals():
		return append(out, Chunk{Type: "tool-output-denied", ToolCallID: id})
	case e.IsError || e.Denied:
		return append(out, Chunk{Type: "tool-output-error", ToolCallID: id, ErrorText: orString(outputText(e.Output), "the tool failed"), Dynamic: t.Dynamic})
	}
	// ai@5 looks a dynamic call up among dynamic parts only when the
	// output says dynamic.
	return append(out, Chunk{Type: "tool-output-available", ToolCallID: id, Output: orNull(e.Output), Dynamic: t.Dynamic})
}

// reissue reports whether a new call is one the client shows, approved
// and not yet run, made again under another id: an ACP agent, told of
// the approval, makes the call itself, and runnel lets it through by its
// name and input (DESIGN §5.2). The client's part then stands for it.
func (s *Stream) reissue(id, name string, input json.RawMessage) bool {
	taken := map[string]bool{}
	for _, x := range s.reissued {
		taken[x] = true
	}
	for _, x := range s.answered() {
		t := s.o.Conversation.Tools[x]
		if t.Approved && !s.settled[x] && !taken[x] && t.Name == name && sameJSON(t.Input, orEmptyObject(input)) {
			s.reissued[id] = x
			return true
		}
	}
	return false
}

// interaction asks the client: an approval as tool-approval-request (ai@6,
// ai@7), and in every profile a data-runnel-interaction part with what
// the frontend needs to draw it (a client tool's render, the options) and
// what a resume needs back (the signature). ai@5 has no approval chunks:
// there the call stays input-available, like a client tool's, and its
// interaction part has render {kind: "approval"} unless it has one.
func (s *Stream) interaction(out []Chunk, it *runnel.Interaction) []Chunk {
	if it == nil {
		return out
	}
	if _, ok := s.tools[it.ToolCallID]; !ok {
		out = s.toolCall(out, it.ToolCallID, it.ToolName, it.Input)
	}
	if _, ok := s.tools[it.ToolCallID]; !ok {
		return out // a call of an earlier message: nothing can show it
	}
	render := it.Render
	if it.Kind == runnel.InteractionApproval {
		if s.o.Profile.approvals() {
			c := Chunk{Type: "tool-approval-request", ApprovalID: it.ID, ToolCallID: it.ToolCallID}
			if s.o.Profile.signature() {
				c.Signature = it.Signature
			}
			out = append(out, c)
		} else if len(render) == 0 {
			render = json.RawMessage(`{"kind":"approval"}`)
		}
	}
	return append(out, s.data(DataInteraction, it.ID, InteractionData{
		InteractionID: it.ID, Kind: it.Kind, ToolCallID: it.ToolCallID, ToolName: it.ToolName,
		Input: orEmptyObject(it.Input), Options: it.Options, Render: render, Signature: it.Signature,
	}, false))
}

func (s *Stream) fail(out []Chunk, msg string) []Chunk {
	if s.failed {
		return out
	}
	s.failed = true
	return append(out, Chunk{Type: "error", ErrorText: orString(msg, "the run failed")})
}

func (s *Stream) data(typ, id string, v any, transient bool) Chunk {
	raw, err := json.Marshal(v)
	if err != nil {
		raw = json.RawMessage(`null`)
	}
	return Chunk{Type: typ, ID: id, Data: raw, Transient: transient}
}

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(a, b json.RawMessage) bool {
	var va, vb any
	return json.Unmarshal(a, &va) == nil && json.Unmarshal(b, &vb) == nil && reflect.DeepEqual(va, vb)
}

// outputText is a tool output as the sentence an error shows: a JSON
// string unquoted, anything else as JSON.
func outputText(raw json.RawMessage) string {
	return runnel.Block{Output: bytes.TrimSpace(raw)}.OutputText()
}
