package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
)

// The bounds on what runnel reads from an MCP server (see Options). A
// user's server is untrusted input like any other: without them a 200 MB
// tool result, a tool list of a million entries or an event stream that
// never ends would be read whole, or forever.
const (
	// DefaultMaxMessageBytes bounds one message: a JSON answer, or one
	// event of a stream. The same bound as a callback response (DESIGN §4.2).
	DefaultMaxMessageBytes = 4 << 20
	// DefaultMaxStreamBytes bounds what a server may send while runnel
	// waits for one answer: the answer's stream with its notifications,
	// across reconnections; on the SSE transport, the session stream
	// between two answers.
	DefaultMaxStreamBytes = 16 << 20
	// DefaultMaxTools bounds the tools one server may list.
	DefaultMaxTools = 512
)

// The JSON-RPC error codes of the answers runnel puts in place of one it
// would not read whole, so the SDK ends the request (JSON-RPC leaves
// -32000 to -32099 to implementations). What the caller hears is decided
// by the exchange's record, not by these codes, which a server could send
// too.
const (
	codeMessageTooLarge = -32099
	codeStreamTooLong   = -32098
	codeTooManyTools    = -32097
)

// limits are one server's bounds.
type limits struct {
	message, stream int64
	tools           int
}

// tooLarge is the sentence for an answer over the message bound.
func (l limits) tooLarge() string {
	return fmt.Sprintf("larger than %s, the most runnel reads of one MCP message", byteSize(l.message))
}

// tooLong is the sentence for a stream over the stream bound.
func (l limits) tooLong() string {
	return fmt.Sprintf("sent more than %s without answering, the most runnel reads while it waits for one answer", byteSize(l.stream))
}

// tooManyTools is the sentence for a tool list over the tools bound.
func (l limits) tooManyTools() string {
	return fmt.Sprintf("it lists more than %d tools, the most runnel takes from one server; a partial list would offer an arbitrary part of it, so none is used", l.tools)
}

func byteSize(n int64) string {
	switch {
	case n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// exchange is one request's claim on what runnel reads for it: the JSON-RPC
// id an answer put in its place must carry, the method (a tools/list
// answer is counted before the SDK decodes it), the bytes its answer's
// stream may still bring (a stream the SDK resumes with a GET carries the
// same context, so it draws on the same budget), and which bound, if any,
// cut the answer short. Pool.Call and connectServer put one in the context
// of the requests they make; a later request in the same context starts
// it anew but keeps the record of a cut.
type exchange struct {
	mu     sync.Mutex
	id     json.RawMessage
	method string
	left   int64
	cut    int // one of the codes above once a bound was hit
}

type exchangeKey struct{}

func withExchange(ctx context.Context) context.Context {
	return context.WithValue(ctx, exchangeKey{}, &exchange{})
}

// exchangeOf returns ctx's exchange, or a fresh one when it has none
// (headerTransport.RoundTrip gives every request one).
func exchangeOf(ctx context.Context) *exchange {
	if e, ok := ctx.Value(exchangeKey{}).(*exchange); ok {
		return e
	}
	return &exchange{}
}

// begin starts the exchange of a new request.
func (e *exchange) begin(id json.RawMessage, method string, budget int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.id, e.method, e.left = id, method, budget
}

// listsTooMany reports whether msg answers this exchange's tools/list with
// more tools than l allows. Counting is cheap; the SDK's decoding of a
// tool costs tens of KiB, so a 4 MiB page of 80,000 tiny tools would cost
// gigabytes of allocation if it reached the SDK.
func (e *exchange) listsTooMany(msg []byte, l limits) bool {
	e.mu.Lock()
	method := e.method
	e.mu.Unlock()
	if method != "tools/list" {
		return false
	}
	var answer struct {
		Result struct {
			Tools []json.RawMessage `json:"tools"`
		} `json:"result"`
	}
	return json.Unmarshal(msg, &answer) == nil && len(answer.Result.Tools) > l.tools
}

// spend charges n bytes, reporting false once the budget is spent.
func (e *exchange) spend(n int64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.left -= n
	return e.left >= 0
}

// forge records that a bound cut the answer short and returns the JSON-RPC
// error answer to hand the SDK in its place (nil when the request has no
// id to answer).
func (e *exchange) forge(code int, l limits) []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cut = code
	if e.id == nil {
		return nil
	}
	return forgedAnswer(e.id, code, l)
}

// breach returns the bound that cut the answer short, or 0.
func (e *exchange) breach() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cut
}

// forgedAnswer is a JSON-RPC error answer to id.
func forgedAnswer(id json.RawMessage, code int, l limits) []byte {
	msg := "the MCP server's answer is " + l.tooLarge()
	switch code {
	case codeStreamTooLong:
		msg = "the MCP server " + l.tooLong()
	case codeTooManyTools:
		msg = "the MCP server " + strings.TrimPrefix(l.tooManyTools(), "it ")
	}
	type wireError struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   wireError       `json:"error"`
	}{"2.0", id, wireError{code, msg}})
	if err != nil { // an id that is not JSON: nothing can answer it
		return nil
	}
	return b
}

// asEvent wraps a JSON-RPC message in an SSE message event.
func asEvent(msg []byte) []byte {
	if msg == nil {
		return nil
	}
	out := append([]byte("event: message\ndata: "), msg...)
	return append(out, "\n\n"...)
}

// errBodyTooLarge ends a body that is neither an answer nor a stream (an
// error page, say) once it passes the message bound.
var errBodyTooLarge = errors.New("the MCP server's response body is larger than runnel reads")

// cappedBody is a response body read up to a bound, then failed.
type cappedBody struct {
	io.ReadCloser
	left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body that ends at the bound from one that
		// goes on.
		var one [1]byte
		if n, err := b.ReadCloser.Read(one[:]); n > 0 {
			return 0, errBodyTooLarge
		} else {
			return 0, err
		}
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// jsonBody is a JSON answer to a request: read whole on the first Read
// (the SDK reads it whole anyway), up to the message bound; past it, the
// rest is left unread and a JSON-RPC error answer takes its place.
type jsonBody struct {
	body io.ReadCloser
	ex   *exchange
	lim  limits
	r    *bytes.Reader
}

func (b *jsonBody) Read(p []byte) (int, error) {
	if b.r == nil {
		// A bytes.Buffer grows by doubling, io.ReadAll by a quarter: for a
		// 4 MiB answer that is 8 MiB allocated instead of 20.
		var buf bytes.Buffer
		if _, err := buf.ReadFrom(io.LimitReader(b.body, b.lim.message+1)); err != nil {
			return 0, err
		}
		data := buf.Bytes()
		code := 0
		switch {
		case int64(len(data)) > b.lim.message:
			code = codeMessageTooLarge
			_ = b.body.Close()
		case b.ex.listsTooMany(data, b.lim):
			code = codeTooManyTools
		}
		if code != 0 {
			if data = b.ex.forge(code, b.lim); data == nil {
				return 0, errBodyTooLarge
			}
		}
		b.r = bytes.NewReader(data)
	}
	return b.r.Read(p)
}

func (b *jsonBody) Close() error { return b.body.Close() }
