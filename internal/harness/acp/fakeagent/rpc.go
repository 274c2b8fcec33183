package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// JSON-RPC error codes the fake uses.
const (
	codeParseError     = -32700
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternalError  = -32603
)

// errClientGone is a request's failure once the client closed stdin.
var errClientGone = errors.New("the client closed stdin before answering")

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("%s (JSON-RPC error %d)", e.Message, e.Code) }

// frame is one JSON-RPC message, in either direction.
type frame struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// logEntry is one line of FAKE_ACP_LOG.
type logEntry struct {
	// T is "recv" (a line from the client), "send" (a line to it) or
	// "note" (something the fake did or saw off the ACP stream).
	T      string          `json:"t"`
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *rpcError       `json:"error,omitempty"`
	// Raw is a received line that was not a JSON-RPC message, or a line
	// a raw step sent.
	Raw  string          `json:"raw,omitempty"`
	Note string          `json:"note,omitempty"`
	Data json.RawMessage `json:"data,omitempty"`
}

func frameEntry(t string, f frame) logEntry {
	return logEntry{T: t, ID: f.ID, Method: f.Method, Params: f.Params, Result: f.Result, Error: f.Error}
}

// eventLog appends entries to FAKE_ACP_LOG, one write per line so a test
// reading the file never sees half an entry. Safe for concurrent use.
type eventLog struct {
	w      io.Writer // nil discards
	stderr io.Writer

	mu     sync.Mutex
	failed bool
}

func (l *eventLog) add(e logEntry) {
	if l.w == nil {
		return
	}
	line, err := json.Marshal(e)
	if err != nil {
		line, _ = json.Marshal(logEntry{T: "note", Note: "unloggable entry", Data: jsonString(err.Error())})
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.w.Write(append(line, '\n')); err != nil && !l.failed {
		l.failed = true
		fmt.Fprintf(l.stderr, "fakeagent: writing the log: %v\n", err)
	}
}

// note logs what the fake did or saw; data is any JSON-encodable value.
func (l *eventLog) note(name string, data any) {
	raw, err := json.Marshal(data)
	if err != nil {
		raw = jsonString(err.Error())
	}
	l.add(logEntry{T: "note", Note: name, Data: raw})
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// conn is the fake's end of the ACP stream: it writes frames to stdout (and
// the log) and pairs the client's answers with the fake's own requests.
// Safe for concurrent use.
type conn struct {
	log       *eventLog
	stringIDs bool

	wmu sync.Mutex
	out io.Writer
	// hung is set by a hang: every later write blocks forever.
	hung atomic.Bool

	mu      sync.Mutex
	next    int
	pending map[string]chan frame
	gone    bool
}

func newConn(out io.Writer, log *eventLog, stringIDs bool) *conn {
	return &conn{out: out, log: log, stringIDs: stringIDs, pending: make(map[string]chan frame)}
}

// writeLine writes one line whole, so concurrent senders never interleave.
func (c *conn) writeLine(line []byte) {
	if c.hung.Load() {
		blockForever()
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.out.Write(append(line, '\n')); err != nil {
		fmt.Fprintf(c.log.stderr, "fakeagent: writing stdout: %v\n", err)
	}
}

// send logs f, then writes it: the log is complete up to any frame the
// client has seen.
func (c *conn) send(f frame) {
	c.sendFrame(f, true)
}

func (c *conn) sendFrame(f frame, logged bool) {
	f.JSONRPC = "2.0"
	line, err := json.Marshal(f)
	if err != nil {
		// Only a scenario's raw JSON can fail here, and it was validated.
		fmt.Fprintf(c.log.stderr, "fakeagent: encoding a frame: %v\n", err)
		return
	}
	if logged {
		c.log.add(frameEntry("send", f))
	}
	c.writeLine(line)
}

// sendRaw writes a scenario's line as is.
func (c *conn) sendRaw(line string) {
	c.log.add(logEntry{T: "send", Raw: line})
	c.writeLine([]byte(line))
}

func (c *conn) notify(method string, params any) {
	c.send(frame{Method: method, Params: mustJSON(params)})
}

func (c *conn) respond(id json.RawMessage, result any) {
	c.send(frame{ID: id, Result: mustJSON(result)})
}

func (c *conn) respondError(id json.RawMessage, e *rpcError) {
	c.send(frame{ID: id, Error: e})
}

// request sends a request to the client and waits for its answer. A
// JSON-RPC error answer is returned as a *rpcError.
func (c *conn) request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	id, ch, err := c.register()
	if err != nil {
		return nil, err
	}
	c.send(frame{ID: id, Method: method, Params: mustJSON(params)})
	select {
	case f, ok := <-ch:
		if !ok {
			return nil, errClientGone
		}
		if f.Error != nil {
			return nil, f.Error
		}
		return f.Result, nil
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, idKey(id))
		c.mu.Unlock()
		return nil, ctx.Err()
	}
}

func (c *conn) register() (json.RawMessage, chan frame, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gone {
		return nil, nil, errClientGone
	}
	n := c.next
	c.next++
	id := json.RawMessage(strconv.Itoa(n))
	if c.stringIDs {
		id = jsonString(fmt.Sprintf("00000000-0000-4000-8000-%012x", n))
	}
	ch := make(chan frame, 1)
	c.pending[idKey(id)] = ch
	return id, ch, nil
}

// deliver hands a response to the request waiting for it; false means no
// request of the fake's has that id.
func (c *conn) deliver(f frame) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := idKey(f.ID)
	ch, ok := c.pending[key]
	if ok {
		delete(c.pending, key)
		ch <- f
	}
	return ok
}

// closePending fails every request still waiting: the client is gone.
func (c *conn) closePending() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gone = true
	for key, ch := range c.pending {
		close(ch)
		delete(c.pending, key)
	}
}

// idKey is an id's compact JSON, so 1 and "1" stay different ids, as they
// are in JSON-RPC.
func idKey(id json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, id) != nil {
		return string(id)
	}
	return b.String()
}

func mustJSON(v any) json.RawMessage {
	switch v := v.(type) {
	case nil:
		return nil
	case json.RawMessage:
		return v // as the scenario gave it; nil stays absent
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("fakeagent: encoding %T: %v", v, err)) // a bug in the fake
	}
	return b
}

// blockForever is a hang. It sleeps rather than blocking on a channel so
// the runtime never takes the hung agent for a deadlock and exits.
func blockForever() {
	for {
		time.Sleep(time.Hour)
	}
}

// sleep waits d or until ctx ends; it reports whether the full time passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
