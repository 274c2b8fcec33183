package codemode

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"modernc.org/quickjs"
)

// toolCall is a call the script made. Its resolve and reject functions are
// the sandbox's, and are freed once it is settled or abandoned.
type toolCall struct {
	server, tool string
	args         json.RawMessage
	resolve      quickjs.Value
	reject       quickjs.Value
}

// callDone is a finished call: its content, or the message of its
// failure. Content that may be JSON is trimmed, and text is the content as
// it came when that is not the same.
type callDone struct {
	call      *toolCall
	content   string
	maybeJSON bool
	text      *string
	failure   string
	failed    bool
	typeError bool // failure rejects with a TypeError: the arguments were not an object
}

// maxPendingCalls caps the calls a script has made and not yet seen answered.
const maxPendingCalls = 10000

// hostCall is tools.<server>.<tool> underneath, the tool given by its index
// in the tool list: it returns a promise and queues the call, which loop
// starts.
func (s *session) hostCall(tool int, args string) quickjs.Value {
	pc, err := s.vm.NewPromiseCapability()
	if err != nil {
		// Out of memory: the tool function rejects.
		return quickjs.UndefinedValue
	}
	c := &toolCall{args: json.RawMessage(args), resolve: pc.Resolve, reject: pc.Reject}
	known := 0 <= tool && tool < len(s.order)
	if known {
		c.server, c.tool = s.order[tool].server, s.order[tool].tool
	}
	switch {
	case s.settled != nil:
		// A promise chain still running after the script returned: the
		// call is not made.
		s.dropped++
		_ = s.settle(callDone{call: c, failed: true, failure: "the script has already returned; this call was not made"})
	case !known:
		// Only the prelude calls, with the indices it was given.
		_ = s.settle(callDone{call: c, failed: true, failure: fmt.Sprintf("unknown tool %d", tool)})
	case !objectJSON(args):
		label := accessor(c.server, c.tool)
		_ = s.settle(callDone{call: c, failed: true, typeError: true,
			failure: label + " takes one object of arguments, e.g. " + label + "({...})"})
	case len(s.waiting)+s.running >= maxPendingCalls || s.pendingBytes+int64(len(args)) > s.opts.MemoryLimit:
		// The arguments live in Go's heap, beyond the sandbox's memory
		// limit: a script must not queue calls without end.
		_ = s.settle(callDone{call: c, failed: true, failure: fmt.Sprintf(
			"too many tool calls waiting (at most %d, with at most %d MiB of arguments); await some before making more",
			maxPendingCalls, s.opts.MemoryLimit>>20)})
	default:
		s.pendingBytes += int64(len(args))
		s.waiting = append(s.waiting, c)
	}
	// The sandbox owns the promise now; only the resolving functions are ours.
	return pc.Promise
}

// launchWaiting starts the queued calls there is room for, unless the
// budget is over or Run has returned without the VM.
func (s *session) launchWaiting() {
	for len(s.waiting) > 0 && s.running < s.opts.MaxConcurrentCalls && s.calls.Err() == nil {
		s.mu.Lock()
		if s.abandoned {
			s.mu.Unlock()
			return
		}
		// Under mu, so that abandon's Wait never races this Add.
		s.wg.Add(1)
		s.mu.Unlock()
		c := s.waiting[0]
		s.waiting = s.waiting[1:]
		s.running++
		if s.running == 1 && len(s.waiting) == 0 {
			// The only call, and the sandbox's queue is drained (loop
			// drains it first): until this call answers nothing can
			// happen in the sandbox, and this goroutine would only wait
			// for it. So it makes the call itself, without a goroutine
			// to start and to wake it. The result goes through results
			// all the same, which is empty: nothing else is running.
			s.call(c)
			return
		}
		go s.call(c)
	}
}

// call makes c and sends its result. Every call is counted in wg, so that
// shutdown and abandon wait for it, wherever it runs.
func (s *session) call(c *toolCall) {
	defer s.wg.Done()
	res, err := s.caller.CallTool(s.calls, c.server, c.tool, c.args)
	s.results <- done(c, res, err)
}

// deliver settles a finished call in the sandbox.
func (s *session) deliver(d callDone) error {
	s.running--
	s.pendingBytes -= int64(len(d.call.args))
	if err := s.enter(); err != nil {
		d.call.free()
		return err
	}
	return s.settle(d)
}

// settle resolves or rejects a call's promise and frees its resolving
// functions. Inside hostCall it runs within the JS that called, where an
// error (out of memory) is the script's to meet. The content goes as a
// string, which the sandbox parses when it may be JSON: the engine's parser
// is the only one to read it.
func (s *session) settle(d callDone) error {
	defer d.call.free()
	var err error
	switch {
	case d.failed:
		_, err = s.reject.Call(quickjs.UndefinedValue, d.call.reject, d.failure, d.typeError)
	case !d.maybeJSON:
		_, err = d.call.resolve.Call(quickjs.UndefinedValue, d.content)
	case d.text != nil:
		_, err = s.resolve.Call(quickjs.UndefinedValue, d.call.resolve, d.content, *d.text)
	default:
		_, err = s.resolve.Call(quickjs.UndefinedValue, d.call.resolve, d.content)
	}
	return err
}

// objectJSON reports whether args, the JSON.stringify of a call's
// arguments, is an object's: anything else (an array, a primitive, a toJSON
// that returns one, or "" for a value without JSON) starts otherwise.
func objectJSON(args string) bool {
	return args != "" && args[0] == '{'
}

func (c *toolCall) free() {
	c.resolve.Free()
	c.reject.Free()
}

// done is how a call ended: its content, parsed in the sandbox when it is
// JSON, or the message it rejects with.
func done(c *toolCall, res CallResult, err error) callDone {
	if err != nil {
		if refusal, ok := errors.AsType[*Refusal](err); ok {
			return callDone{call: c, failed: true, failure: refusal.Error()}
		}
		return callDone{call: c, failed: true, failure: err.Error()}
	}
	if res.IsError {
		return callDone{call: c, failed: true, failure: res.Content}
	}
	if content := strings.TrimSpace(res.Content); jsonShaped(content) {
		d := callDone{call: c, content: content, maybeJSON: true}
		if len(content) != len(res.Content) {
			d.text = &res.Content
		}
		return d
	}
	return callDone{call: c, content: res.Content}
}

// jsonShaped reports whether trimmed content could be JSON, by its ends: a
// call resolves to the parsed JSON when its content is JSON and to the text
// otherwise. It lets most text through without a parser's attempt; text
// that has the shape, such as "[1] done, [2] failed" or "3 of 4", costs one
// failed parse.
func jsonShaped(s string) bool {
	if s == "" {
		return false
	}
	switch first, last := s[0], s[len(s)-1]; {
	case first == '{':
		return last == '}'
	case first == '[':
		return last == ']'
	case first == '"':
		return len(s) > 1 && last == '"'
	case first == '-' || '0' <= first && first <= '9':
		return '0' <= last && last <= '9'
	}
	return s == "true" || s == "false" || s == "null"
}

// shutdown ends what the script started before the VM goes: it cancels the
// calls in flight, waits for their goroutines and frees every call's
// resolving functions. It can run twice.
func (s *session) shutdown() {
	s.cancelCalls()
	s.wg.Wait()
	for len(s.results) > 0 { // exact: every goroutine has sent
		(<-s.results).call.free()
	}
	for _, c := range s.waiting {
		c.free()
	}
	s.dropped += len(s.waiting)
	s.waiting = nil
}
