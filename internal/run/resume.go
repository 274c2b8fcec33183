package run

import (
	"errors"
	"time"

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

// resumeOptions tells planResume about the run's tools and signing.
type resumeOptions struct {
	isClient   func(name string) bool
	boundPaths func(name string) []string
	// secret, when set, requires every live approval to carry the
	// signature of the interaction runnel parked its call behind, issued
	// at most ttl before now; and each decision then runs only the call it
	// was signed for (an Exact store).
	secret []byte
	now    time.Time
	ttl    time.Duration
}

// planResume reads the parked calls, the superseded ones and the stored
// answers of msgs (the conversation without system messages), all from
// one permission.Replay, so the store, the parked calls and the signature
// check agree on which result is an approval and which call it answers.
// With a secret, an approval that does not answer a parked call, or whose
// signature does not verify, refuses the request: an unsigned approval
// could otherwise run a call nobody was asked about.
func planResume(msgs []runnel.Message, o resumeOptions) (*resumption, error) {
	isClient := func(name string) bool { return o.isClient != nil && o.isClient(name) }
	replay := permission.ReadReplay(msgs, isClient)
	r := &resumption{
		history: withoutApprovals(msgs, replay),
		store: permission.Extract(msgs, permission.ExtractOptions{
			BoundPaths: o.boundPaths, IsClientTool: o.isClient, Exact: len(o.secret) > 0,
		}),
		stale: map[string]bool{},
	}
	parked := map[*permission.ReplayedCall]bool{}
	for _, c := range replay.Calls {
		if c.Message > replay.Previous && c.Block.ToolCallID != "" && !c.Settled() && !readByTheModel(c, msgs, replay.Turn) {
			parked[c] = true
			r.parked = append(r.parked, c.Block)
			if replay.Turn >= 0 && c.Message < replay.Turn {
				r.stale[c.Block.ToolCallID] = true
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
		if err := verifyApprovals(replay, parked, o); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// withoutApprovals is the history as the model may read it: approval
// blocks are runnel's to read, and whatever the decision produced takes
// their place (the loop answers the parked calls; native.answerInPlace
// drops the rest).
func withoutApprovals(msgs []runnel.Message, replay *permission.Replay) []runnel.Message {
	type at struct{ message, index int }
	approvals := map[at]bool{}
	mark := func(a *permission.ReplayedAnswer) {
		if a.Class == permission.ResultApproval {
			approvals[at{a.Message, a.Index}] = true
		}
	}
	for _, c := range replay.Calls {
		for _, a := range c.Answers {
			mark(a)
		}
	}
	for _, a := range replay.Untied {
		mark(a)
	}
	out := make([]runnel.Message, 0, len(msgs))
	for i, m := range msgs {
		kept := m.Content[:0:0]
		for j, b := range m.Content {
			if !approvals[at{i, j}] {
				kept = append(kept, b)
			}
		}
		if len(kept) > 0 || len(m.Content) == 0 {
			out = append(out, runnel.Message{Role: m.Role, Content: kept})
		}
	}
	return out
}

// verifyApprovals checks, with signing on, that every live approval that
// approves (a denial can run nothing) answers a parked call and carries
// the signature of the interaction runnel parked that call behind, still
// within its lifetime. Live means permission.Extract would store it: its
// call has not been answered for real since. It reads each approval with
// permission.AnswerOf, the reader the store uses, so what this check
// deems a denial is a denial to the store too.
func verifyApprovals(replay *permission.Replay, parked map[*permission.ReplayedCall]bool, o resumeOptions) error {
	refuse := func(id, why string) error {
		return invalid("The approval for tool call %q does not match a call runnel paused for: %s. Send the approval back with the interaction's id and signature: {\"approved\": true, \"interactionId\": \"…\", \"signature\": \"…\"}.", id, why)
	}
	for _, a := range replay.Untied {
		if a.Class == permission.ResultApproval && permission.AnswerOf(a.Block).Approved {
			return refuse(a.Block.ToolCallID, "no call in the conversation has that id")
		}
	}
	for _, c := range replay.Calls {
		if c.Spent() {
			continue
		}
		for _, a := range c.Answers {
			ans := permission.AnswerOf(a.Block)
			if a.Class != permission.ResultApproval || !ans.Approved {
				continue
			}
			id := c.Block.ToolCallID
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
			err := permission.Verify(o.secret, ans.Signature, iid, id, c.Block.ToolName, signedInput(c.Block.Input), o.now, o.ttl)
			switch {
			case errors.Is(err, permission.ErrSignatureExpired):
				return refuse(id, "its signature has expired (an approval is valid for "+o.ttl.String()+" after runnel asked); send the conversation without this answer and runnel asks again")
			case err != nil:
				return refuse(id, "its signature does not verify for that call's id, name and arguments")
			}
		}
	}
	return nil
}

// readByTheModel reports whether a client tool's call got the browser's
// output before the latest user message and the model answered after it:
// the call is done. (The store keeps only the outputs of the turn being
// resumed, so, parked, the call would take the output of a later
// identical call by its key, and leave that call asking again.) An output
// sent next to a new message, with no model turn after it, is not.
func readByTheModel(c *permission.ReplayedCall, msgs []runnel.Message, turn int) bool {
	for _, a := range c.Answers {
		if a.Class != permission.ResultClientOutput || turn < 0 || a.Message >= turn {
			continue
		}
		for _, m := range msgs[a.Message+1 : turn] {
			if m.Role == runnel.RoleAssistant {
				return true
			}
		}
	}
	return false
}
