package codemode

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"modernc.org/quickjs"
)

type settlement struct{ kind, payload string }

// hostReport receives how the script's promise settled. From here on no
// call starts, the calls in flight are cancelled, and the JS still running
// (a promise chain the script left behind) is interrupted.
func (s *session) hostReport(kind, payload string) {
	if s.settled != nil {
		return
	}
	if kind == "interrupted" && s.budget.Err() == nil && time.Now().Before(s.deadline) {
		// Only the engine interrupts; a script throwing its own
		// InternalError("interrupted") just failed.
		kind, payload = "error", "InternalError: interrupted"
	}
	s.settled = &settlement{kind: kind, payload: payload}
	s.cancelled = s.running
	s.cancelCalls()
	s.vm.Interrupt()
}

// hostLog is the console underneath: it keeps line and returns the room
// left, in bytes.
func (s *session) hostLog(line string) int {
	room := s.keepLog(line)
	if s.hooks.log != nil {
		s.hooks.log(line)
	}
	return room
}

// keepLog keeps line and returns the room left. The line that does not fit
// is cut on a character boundary and marked, and the room becomes -1: the
// console stops calling.
func (s *session) keepLog(line string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.logRoom < 0 {
		return -1
	}
	if len(line) <= s.logRoom {
		s.logs = append(s.logs, line)
		s.logRoom -= len(line)
		return s.logRoom
	}
	cut := s.logRoom
	for cut > 0 && !utf8.RuneStart(line[cut]) {
		cut--
	}
	marker := fmt.Sprintf("… [console output truncated at %d bytes]", s.opts.MaxLogBytes)
	if cut > 0 {
		marker = line[:cut] + " " + marker
	}
	s.logs = append(s.logs, marker)
	s.logRoom = -1
	return -1
}

// logsSoFar is a copy of the logs, which hostLog may still be appending to
// when Run abandons the VM.
func (s *session) logsSoFar() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.logs)
}

// finish turns the settlement into the Output. It runs after shutdown, so
// the counts of calls dropped and cancelled are final.
func (s *session) finish() Output {
	s.warnUnawaited()
	out := Output{Logs: s.logsSoFar()}
	switch st := s.settled; st.kind {
	case "ok":
		if len(st.payload) > s.opts.MaxResultBytes {
			return s.tooLarge(strconv.Itoa(len(st.payload)))
		}
		if !json.Valid([]byte(st.payload)) {
			return internalFailure()
		}
		out.Result = json.RawMessage(st.payload)
	case "too_large":
		return s.tooLarge("at least " + st.payload)
	case "unserialisable":
		out.Failure = FailureScript
		out.Error = "the script's return value cannot be converted to JSON: " + cleanStack(st.payload)
	case "interrupted":
		return s.failure(errStopped)
	case "memory":
		return s.failure(errOutOfMemory)
	default:
		out.Failure = FailureScript
		out.Error = cleanStack(st.payload)
	}
	return out
}

// warnUnawaited tells the model, in the logs and whatever their limit, about
// calls the script did not wait for.
func (s *session) warnUnawaited() {
	plural := func(n int) string {
		if n == 1 {
			return "1 tool call was"
		}
		return fmt.Sprintf("%d tool calls were", n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dropped > 0 {
		s.logs = append(s.logs, "[warn] "+plural(s.dropped)+" not made because the script had already returned; await the calls whose results or effects you need")
	}
	if s.cancelled > 0 {
		s.logs = append(s.logs, "[warn] "+plural(s.cancelled)+" still running when the script returned and cancelled; await the calls whose results or effects you need")
	}
}

func (s *session) tooLarge(size string) Output {
	return Output{
		Logs:    s.logsSoFar(),
		Failure: FailureScript,
		Error:   fmt.Sprintf("the script's return value is %s bytes of JSON, over the limit of %d; return less (filter or summarise in the script)", size, s.opts.MaxResultBytes),
	}
}

// errStopped is a JS entry refused or interrupted because the budget ended
// or the caller went away; errOutOfMemory is the script reporting that it
// ran out of memory.
var (
	errStopped     = errors.New("stopped")
	errOutOfMemory = errors.New("out of memory")
)

// failure turns an error from the VM into the Output.
func (s *session) failure(err error) Output {
	out := Output{Logs: s.logsSoFar()}
	var qe *quickjs.Error
	switch {
	case errors.As(err, &qe) && qe.Name == "InternalError" && qe.Message == "interrupted", errors.Is(err, errStopped):
		return s.stopped(out.Logs)
	case errors.As(err, &qe) && qe.Name == "InternalError" && qe.Message == "out of memory", errors.Is(err, errOutOfMemory):
		out.Failure = FailureMemory
		out.Error = fmt.Sprintf("the script ran out of memory (the sandbox has %d MiB) and was stopped", s.opts.MemoryLimit>>20)
	case errors.As(err, &qe):
		out.Failure = FailureScript
		out.Error = cleanStack(qe.Name + ": " + qe.Message + "\n" + qe.Stack)
	default:
		return internalFailure()
	}
	return out
}

// stopped is the Output of a script that the budget or the caller ended.
func (s *session) stopped(logs []string) Output {
	if s.parent.Err() != nil {
		return Output{Logs: logs, Failure: FailureCancelled, Error: "the script was stopped because the run was cancelled"}
	}
	return Output{
		Logs:    logs,
		Failure: FailureTimeout,
		Error: fmt.Sprintf("the script did not finish within %s and was stopped (its tool calls were cancelled); do less per script or pass a larger timeoutMs (at most %d)",
			s.opts.Timeout, MaxTimeout.Milliseconds()),
	}
}

func internalFailure() Output {
	return Output{Failure: FailureInternal, Error: "internal error: the JavaScript sandbox failed"}
}

// maxStackFrames caps the stack trace in an error the model reads.
const maxStackFrames = 10

// cleanStack keeps the frames of a JS error's stack that are the script's:
// the prelude's functions are named runnel$..., the frame of the global
// code "<eval>" is the wrapper calling the script, and the rest of
// "<eval>" is the script.
func cleanStack(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	kept := lines[:1]
	for _, l := range lines[1:] {
		frame := strings.TrimSpace(l)
		if frame == "" || strings.Contains(frame, "runnel$") || strings.HasPrefix(frame, "at <eval> (") {
			continue
		}
		if len(kept) > maxStackFrames {
			kept = append(kept, "    …")
			break
		}
		kept = append(kept, scriptPosition(l))
	}
	return strings.Join(kept, "\n")
}

// scriptPrefix opens the function the script is the body of. The script
// follows on the same line.
const scriptPrefix = "(async () => {"

// scriptPosition writes a frame's <eval>:line:column as the script's own
// position: <script>, and columns on the first line without the prefix.
func scriptPosition(frame string) string {
	const first = "<eval>:1:"
	if i := strings.Index(frame, first); i >= 0 {
		digits := frame[i+len(first):]
		n := 0
		for n < len(digits) && '0' <= digits[n] && digits[n] <= '9' {
			n++
		}
		if col, err := strconv.Atoi(digits[:n]); err == nil && col > len(scriptPrefix) {
			frame = frame[:i] + first + strconv.Itoa(col-len(scriptPrefix)) + digits[n:]
		}
	}
	return strings.ReplaceAll(frame, "<eval>", "<script>")
}
