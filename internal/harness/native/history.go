package native

import (
	"github.com/runnel/runnel"
)

// Unanswered answers, for the model only, a call of the replayed history
// that has no result at all: the conversation went on without it, and no
// model API accepts a call left open.
const Unanswered = "NOT_EXECUTED: this call was never answered and did not run; retry the same call if still required."

// answerInPlace returns the conversation the way every model API accepts
// it: each assistant message with tool calls is followed by one tool
// message holding exactly one result per call, in call order.
//
// A replayed history need not look like that. A platform sends approvals
// and browser outputs back in a user message, a person may type a new
// message before a parked call is settled (its result then comes after
// that message), and a paused turn's history holds a Deferred result for
// a call that later ran. So each result is tied to the nearest earlier
// call with its toolCallId (providers may reuse ids across turns) and
// moved next to it. When a call has several results, a real one beats a
// Deferred one, and the later of two equals wins (a resumed call's result
// is appended after whatever answered it). Approval blocks are never
// results: they tell runnel what a person decided, and the result of that
// decision replaces them. A result that answers no call is dropped, and a
// call with no result gets Unanswered, since either would make the API
// refuse the whole request. A well-formed history comes back unchanged.
func answerInPlace(msgs []runnel.Message) []runnel.Message {
	type callRef struct {
		block runnel.Block
		best  *runnel.Block
		rank  int
	}
	var calls []*callRef
	callsOf := map[int][]*callRef{} // by message index
	latest := map[string]*callRef{}
	for i, m := range msgs {
		for _, b := range m.Content {
			switch b.Type {
			case runnel.BlockToolCall:
				c := &callRef{block: b}
				calls = append(calls, c)
				callsOf[i] = append(callsOf[i], c)
				latest[b.ToolCallID] = c
			case runnel.BlockToolResult:
				c := latest[b.ToolCallID]
				rank := resultRank(b)
				if c == nil || b.ToolCallID == "" || rank == 0 {
					continue
				}
				if rank >= c.rank {
					c.best, c.rank = &b, rank
				}
			}
		}
	}
	if len(calls) == 0 && !hasResults(msgs) {
		return msgs
	}
	out := make([]runnel.Message, 0, len(msgs)+1)
	for i, m := range msgs {
		kept := m.Content[:0:0]
		for _, b := range m.Content {
			if b.Type != runnel.BlockToolResult {
				kept = append(kept, b)
			}
		}
		if len(kept) > 0 {
			out = append(out, runnel.Message{Role: m.Role, Content: kept})
		}
		if len(callsOf[i]) == 0 {
			continue
		}
		answers := runnel.Message{Role: runnel.RoleTool}
		for _, c := range callsOf[i] {
			r := runnel.Block{Type: runnel.BlockToolResult, ToolCallID: c.block.ToolCallID, ToolName: c.block.ToolName,
				Output: runnel.TextOutput(Unanswered), IsError: true}
			if c.best != nil {
				r = *c.best
			}
			answers.Content = append(answers.Content, r)
		}
		out = append(out, answers)
	}
	return out
}

// resultRank orders the results of one call: 0 is not a result at all
// (an approval), 1 a Deferred settlement, 2 anything else.
func resultRank(b runnel.Block) int {
	switch {
	case b.Kind == runnel.ResultKindApproval:
		return 0
	case b.OutputHasPrefix(deferredPrefix):
		return 1
	}
	return 2
}

// deferredPrefix is how Deferred and every other "paused, not run"
// settlement begins.
const deferredPrefix = "DEFERRED_NOT_EXECUTED"

func hasResults(msgs []runnel.Message) bool {
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type == runnel.BlockToolResult {
				return true
			}
		}
	}
	return false
}
