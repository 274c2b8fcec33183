package native

import (
	"context"

	"github.com/runnel/runnel"
)

// resume is the first phase of every run. When the replayed conversation
// ends in calls a paused turn left waiting (Turn.Parked), it settles them
// before the model is called again (DESIGN §5.4): each is announced again
// with a tool_call event, gets its verdict from the Dispatcher, which
// knows the answers the request carries (an approval runs the call, a
// denial or a browser's output answers it), and its result goes into one
// tool message, in the history and in what this turn adds. A call that
// nobody answered pauses the turn again, and the model is not called.
//
// Then, whatever was parked, the history is put in the order every model
// API requires (answerInPlace): results sent back in a user message, or
// after a newer user message, follow the calls they answer.
func (s *state) resume(ctx context.Context) phase {
	if parked := s.turn.Parked; len(parked) > 0 {
		for _, c := range parked {
			s.sink.Emit(runnel.Event{Type: runnel.EventToolCall, ID: c.ToolCallID, Name: c.ToolName, Input: c.Input})
		}
		results, interactions := s.dispatch(ctx, parked, runOnPause)
		s.addResults(parked, results)
		s.log.DebugContext(ctx, "resumed parked calls", "parked", len(parked), "still_waiting", len(interactions))
		if len(interactions) > 0 {
			s.out.Interactions = interactions
			s.out.StopReason = runnel.StopPaused
			return phaseFinish
		}
	}
	s.history = answerInPlace(s.history)
	return phaseCallModel
}
