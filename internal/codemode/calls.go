package codemode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

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

// callDone is a finished call: its result as JSON or as text, or the
// message of its failure.
type callDone struct {
	call    *toolCall
	json    json.RawMessage
	text    string
	failure string
	failed  bool
}

// maxPendingCalls caps the calls a script has made and not yet seen answered.
const maxPendingCalls = 10000

// hostCall is tools.<server>.<tool> underneath: it returns a promise and
// queues the call, which loop starts.
func (s *session) hostCall(server, tool, args string) quickjs.Value {
	pc, err := s.vm.NewPromiseCapability()
	if err != nil {
		// Out of memory: the tool function rejects.
		return quickjs.UndefinedValue
	}
	c := &toolCall{server: server, tool: tool, args: json.RawMessage(args), resolve: pc.Resolve, reject: pc.Reject}
	switch {
	case s.settled != nil:
		// A promise chain still running after the script returned: the
		// call is not made.
		s.dropped++
		_ = s.settle(callDone{call: c, failed: true, failure: "the script has already returned; this call was not made"})
	case !s.known[toolKey{server, tool}]:
		_ = s.settle(callDone{call: c, failed: true, failure: fmt.Sprintf("unknown tool %s.%s", server, tool)})
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
		go func() {
			defer s.wg.Done()
			res, err := s.caller.CallTool(s.calls, c.server, c.tool, c.args)
			s.results <- done(c, res, err)
		}()
	}
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
// error (out of memory) is the script's to meet.
func (s *session) settle(d callDone) error {
	defer d.call.free()
	var err error
	switch {
	case d.failed:
		var e quickjs.Value
		if e, err = s.makeError.CallValue(quickjs.UndefinedValue, d.failure); err == nil {
			_, err = d.call.reject.Call(quickjs.UndefinedValue, e)
			e.Free()
		}
	case d.json != nil:
		_, err = d.call.resolve.Call(quickjs.UndefinedValue, d.json)
	default:
		_, err = d.call.resolve.Call(quickjs.UndefinedValue, d.text)
	}
	return err
}

func (c *toolCall) free() {
	c.resolve.Free()
	c.reject.Free()
}

// done is how a call ended: its content, parsed in the sandbox when it is
// JSON, or the message it rejects with.
func done(c *toolCall, res CallResult, err error) callDone {
	var refusal *Refusal
	switch {
	case errors.As(err, &refusal):
		return callDone{call: c, failed: true, failure: refusal.Error()}
	case err != nil:
		return callDone{call: c, failed: true, failure: err.Error()}
	case res.IsError:
		return callDone{call: c, failed: true, failure: res.Content}
	}
	if content := bytes.TrimSpace([]byte(res.Content)); len(content) > 0 && json.Valid(content) {
		return callDone{call: c, json: content}
	}
	return callDone{call: c, text: res.Content}
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
	if s.hasMakeError {
		s.makeError.Free()
		s.hasMakeError = false
	}
}
