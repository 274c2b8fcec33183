package run

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/permission"
)

// resumption is what a replayed conversation asks of a run before its
// model is called again (DESIGN §5.4). It is read from the request alone,
// so any replica can resume any turn.
type resumption struct {
	// history is the conversation as the model sees it: approval blocks
	// removed, since the result of what the person decided replaces them.
	history []runnel.Message
	// parked are the calls a paused turn left waiting: calls of the turn
	// being resumed (after the latest user message with text) or of the
	// turn before it, with no result but answers (approvals, browser
	// outputs) or none at all. The loop settles them first.
	parked []runnel.Block
	// superseded are the parked calls of the turn before a newer user
	// message that nobody answered: the person typed instead of clicking,
	// so they are denied rather than asked again (nothing must wedge).
	superseded map[string]bool
	// stale are all the parked calls of the turn before a newer user
	// message. Their answers still settle them, but none of them may pause
	// the run again: what would pause is superseded instead.
	stale map[string]bool
	// store holds the decisions and browser outputs the history carries.
	store *permission.Store
}

// resultClass is what a tool_result block is, read as permission.Extract
// reads it: kind first, then the shape.
type resultClass int

const (
	classExecuted resultClass = iota // the call ran, or was refused
	classDeferred                    // settled without running; not an answer
	classApproval
	classClientOutput
)

// replayedCall is a tool_call block of the history and what answers it.
type replayedCall struct {
	message int
	block   runnel.Block
	answers []replayedAnswer
}

type replayedAnswer struct {
	block runnel.Block
	class resultClass
}

// settled reports whether the call has a result the model has read: one
// that ran or was refused, or a Deferred one (the model was told to retry).
func (c *replayedCall) settled() bool {
	for _, a := range c.answers {
		if a.class == classExecuted || a.class == classDeferred {
			return true
		}
	}
	return false
}

// spent reports whether an approval of the call was used up: the call has
// since been answered for real, so the approval must not approve another.
func (c *replayedCall) spent() bool {
	for _, a := range c.answers {
		if a.class == classExecuted || a.class == classClientOutput {
			return true
		}
	}
	return false
}

// resumeOptions tells planResume about the run's tools and signing.
type resumeOptions struct {
	isClient   func(name string) bool
	boundPaths func(name string) []string
	// secret, when set, requires every live approval to carry the
	// signature of the interaction runnel parked its call behind.
	secret []byte
}

// planResume reads the parked calls, the superseded ones and the stored
// answers of msgs (the conversation without system messages). With a
// secret, an approval that does not answer a parked call, or whose
// signature does not verify, refuses the request: an unsigned approval
// could otherwise run a call nobody was asked about.
func planResume(msgs []runnel.Message, o resumeOptions) (*resumption, error) {
	isClient := func(name string) bool { return o.isClient != nil && o.isClient(name) }
	calls, untied := scanReplay(msgs, isClient)
	r := &resumption{
		history: withoutApprovals(msgs, isClient),
		store: permission.Extract(msgs, permission.ExtractOptions{
			BoundPaths: o.boundPaths, IsClientTool: o.isClient,
		}),
	}
	turn := permission.LatestUserText(msgs)
	previous := -1
	if turn > 0 {
		previous = permission.LatestUserText(msgs[:turn])
	}
	parked := map[*replayedCall]bool{}
	r.stale = map[string]bool{}
	for _, c := range calls {
		if c.message > previous && c.block.ToolCallID != "" && !c.settled() {
			parked[c] = true
			r.parked = append(r.parked, c.block)
			if turn >= 0 && c.message < turn {
				r.stale[c.block.ToolCallID] = true
			}
		}
	}
	for _, p := range permission.Unanswered(msgs) {
		if !p.Deferred && p.ToolCallID != "" {
			if r.superseded == nil {
				r.superseded = map[string]bool{}
			}
			r.superseded[p.ToolCallID] = true
		}
	}
	if len(o.secret) > 0 {
		if err := verifyApprovals(calls, untied, parked, o.secret); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// scanReplay ties every tool_result to the nearest earlier call with its
// toolCallId, as permission.Extract does, and returns the calls in order
// and the results that answer none.
func scanReplay(msgs []runnel.Message, isClient func(string) bool) ([]*replayedCall, []replayedAnswer) {
	var calls []*replayedCall
	var untied []replayedAnswer
	latest := map[string]*replayedCall{}
	for i, m := range msgs {
		for _, b := range m.Content {
			switch b.Type {
			case runnel.BlockToolCall:
				c := &replayedCall{message: i, block: b}
				calls = append(calls, c)
				if b.ToolCallID != "" {
					latest[b.ToolCallID] = c
				}
			case runnel.BlockToolResult:
				c := latest[b.ToolCallID]
				if b.ToolCallID == "" {
					c = nil
				}
				name := b.ToolName
				if c != nil {
					name = c.block.ToolName
				}
				a := replayedAnswer{block: b, class: classify(b, isClient(name))}
				if c == nil {
					untied = append(untied, a)
				} else {
					c.answers = append(c.answers, a)
				}
			}
		}
	}
	return calls, untied
}

// classify mirrors permission.Extract: a Deferred text is never an
// answer; an explicit kind wins; without one, an object output with a
// boolean approved is an approval, and any other result of a client tool
// is its output.
func classify(b runnel.Block, isClient bool) resultClass {
	switch {
	case strings.HasPrefix(b.OutputText(), permission.DeferredPrefix):
		return classDeferred
	case b.Kind == runnel.ResultKindApproval:
		return classApproval
	case b.Kind == runnel.ResultKindClientOutput:
		return classClientOutput
	case b.Kind != "":
		return classExecuted
	}
	if _, ok := approvalShape(b.Output); ok {
		return classApproval
	}
	if isClient {
		return classClientOutput
	}
	return classExecuted
}

// approvalAnswer is an approval block's output: the person's answer and,
// when signing is on, the interaction it answers.
type approvalAnswer struct {
	Approved      *bool  `json:"approved"`
	Reason        string `json:"reason"`
	InteractionID string `json:"interactionId"`
	Signature     string `json:"signature"`
}

// approvalShape reads an output that is an approval by its shape: an
// object with a boolean approved, or a string holding one (some clients
// send every output as text).
func approvalShape(out json.RawMessage) (approvalAnswer, bool) {
	out = bytes.TrimSpace(out)
	var s string
	if len(out) > 0 && out[0] == '"' && json.Unmarshal(out, &s) == nil {
		out = []byte(strings.TrimSpace(s))
	}
	var a approvalAnswer
	if len(out) == 0 || out[0] != '{' || json.Unmarshal(out, &a) != nil || a.Approved == nil {
		return approvalAnswer{}, false
	}
	return a, true
}

// approves reports whether an approval block says yes. With kind
// "approval" a bare true counts too; anything unreadable is a denial.
func approves(b runnel.Block) (approvalAnswer, bool) {
	if a, ok := approvalShape(b.Output); ok {
		return a, *a.Approved
	}
	var yes bool
	if json.Unmarshal(b.Output, &yes) == nil && yes {
		return approvalAnswer{}, true
	}
	return approvalAnswer{}, false
}

// withoutApprovals is the history as the model may read it: approval
// blocks are runnel's to read, and whatever the decision produced takes
// their place (the loop answers the parked calls; native.answerInPlace
// drops the rest).
func withoutApprovals(msgs []runnel.Message, isClient func(string) bool) []runnel.Message {
	names := map[string]string{}
	out := make([]runnel.Message, 0, len(msgs))
	for _, m := range msgs {
		kept := m.Content[:0:0]
		for _, b := range m.Content {
			if b.Type == runnel.BlockToolCall {
				names[b.ToolCallID] = b.ToolName
			}
			if b.Type == runnel.BlockToolResult && classify(b, isClient(names[b.ToolCallID])) == classApproval {
				continue
			}
			kept = append(kept, b)
		}
		if len(kept) > 0 || len(m.Content) == 0 {
			out = append(out, runnel.Message{Role: m.Role, Content: kept})
		}
	}
	return out
}

// verifyApprovals checks, with signing on, that every live approval that
// approves (a denial can run nothing) answers a parked call and carries
// the signature of the interaction runnel parked that call behind. Live
// means permission.Extract would store it: its call has not been answered
// for real since.
func verifyApprovals(calls []*replayedCall, untied []replayedAnswer, parked map[*replayedCall]bool, secret []byte) error {
	refuse := func(id, why string) error {
		return invalid("The approval for tool call %q does not match a call runnel paused for: %s. Send the approval back with the interaction's id and signature: {\"approved\": true, \"interactionId\": \"…\", \"signature\": \"…\"}.", id, why)
	}
	for _, a := range untied {
		if _, yes := approves(a.block); a.class == classApproval && yes {
			return refuse(a.block.ToolCallID, "no call in the conversation has that id")
		}
	}
	for _, c := range calls {
		if c.spent() {
			continue
		}
		for _, a := range c.answers {
			ans, yes := approves(a.block)
			if a.class != classApproval || !yes {
				continue
			}
			id := c.block.ToolCallID
			switch {
			case !parked[c]:
				return refuse(id, "that call is not waiting for an answer")
			case ans.Signature == "":
				return refuse(id, "it carries no signature")
			}
			iid := ans.InteractionID
			if iid == "" {
				iid = interactionID(id)
			}
			if !permission.Verify(secret, ans.Signature, iid, id, c.block.ToolName, signedInput(c.block.Input)) {
				return refuse(id, "its signature does not verify for that call's id, name and arguments")
			}
		}
	}
	return nil
}
