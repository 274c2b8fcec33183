package mcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"
)

// eventReader reads an SSE stream one event at a time, as the raw bytes
// of its lines, holding at most max bytes of one event.
type eventReader struct {
	br      *bufio.Reader
	max     int64
	buf     []byte // reused: an event is handed on before the next is read
	midLine bool   // the last bytes consumed ended inside a line
}

func newEventReader(r io.Reader, max int64) *eventReader {
	return &eventReader{br: bufio.NewReaderSize(r, 32<<10), max: max}
}

// next reads the next event, up to and including the blank line that ends
// it. An event longer than max is read no further: tooLarge is set, raw
// holds its first bytes, and skip discards the rest. At the end of the
// stream err is io.EOF, with whatever the stream ended on in raw.
func (r *eventReader) next() (raw []byte, tooLarge bool, err error) {
	buf := r.buf[:0]
	line := 0 // bytes of the current line read so far
	for {
		frag, err := r.br.ReadSlice('\n')
		// The blank line that ends an event is let through past max, so
		// an event that fits is never mistaken for one to skip.
		atEnd := line == 0 && err == nil && isBlankLine(frag)
		if !atEnd && int64(len(buf)+len(frag)) > r.max {
			r.midLine = err != nil // with no error the fragment ended its line
			r.buf = appendDoubling(buf, frag[:int(r.max)-len(buf)])
			return r.buf, true, nil
		}
		buf = appendDoubling(buf, frag)
		r.buf = buf
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			line += len(frag)
		case err != nil:
			return buf, false, err
		case atEnd:
			return buf, false, nil
		default:
			line = 0
		}
	}
}

// appendDoubling is append, growing by doubling: a 4 MiB event read in
// 32 KiB fragments costs 8 MiB of allocation rather than the 20 of
// append's quarter growth.
func appendDoubling(buf, more []byte) []byte {
	if cap(buf)-len(buf) < len(more) {
		grown := make([]byte, len(buf), max(2*cap(buf), len(buf)+len(more)))
		copy(grown, buf)
		buf = grown
	}
	return append(buf, more...)
}

// isBlankLine reports whether a whole line is blank. Only "\n" and "\r\n"
// count: a line of a million "\r" is blank to the SDK, but letting it
// through as the end of an event would let it past the bound. Seeing it
// as content only makes the event this reader counts longer.
func isBlankLine(line []byte) bool {
	return string(line) == "\n" || string(line) == "\r\n"
}

// skip discards the rest of an event next cut short, at most limit bytes;
// done reports that its end was reached.
func (r *eventReader) skip(limit int64) (n int64, done bool, err error) {
	for n < limit {
		frag, err := r.br.ReadSlice('\n')
		n += int64(len(frag))
		if errors.Is(err, bufio.ErrBufferFull) {
			r.midLine = true
			continue
		}
		if err != nil {
			return n, false, err
		}
		blank := !r.midLine && isBlankLine(frag)
		r.midLine = false
		if blank {
			return n, true, nil
		}
	}
	return n, false, nil
}

// callStream is the event stream answering one request (the POST's own
// response, or a GET resuming it). It hands the SDK whole events of at
// most the message bound and charges every byte to the request's
// exchange; past either bound the server's stream is closed, and a
// JSON-RPC error answer for the request ends what the SDK reads, so the
// call fails and the session goes on.
type callStream struct {
	body   io.ReadCloser
	events *eventReader
	ex     *exchange
	lim    limits
	buffered
}

// buffered is what a stream has produced and not yet handed out, and the
// error that ends it once that is out.
type buffered struct {
	out []byte
	err error
}

// read hands out what is buffered, calling next until there is some or
// the stream has ended.
func (b *buffered) read(p []byte, next func()) (int, error) {
	for len(b.out) == 0 && b.err == nil {
		next()
	}
	if len(b.out) > 0 {
		n := copy(p, b.out)
		b.out = b.out[n:]
		return n, nil
	}
	return 0, b.err
}

func newCallStream(body io.ReadCloser, ex *exchange, lim limits) *callStream {
	return &callStream{body: body, events: newEventReader(body, lim.message), ex: ex, lim: lim}
}

func (s *callStream) Read(p []byte) (int, error) { return s.read(p, s.next) }

func (s *callStream) next() {
	raw, tooLarge, err := s.events.next()
	switch {
	case tooLarge:
		s.cut(codeMessageTooLarge)
	case !s.ex.spend(int64(len(raw))):
		s.cut(codeStreamTooLong)
	case s.ex.listsTooMany(eventData(raw), s.lim):
		s.cut(codeTooManyTools)
	default:
		s.out, s.err = raw, err
	}
}

func (s *callStream) cut(code int) {
	_ = s.body.Close()
	s.out, s.err = asEvent(s.ex.forge(code, s.lim)), io.EOF
	if s.out == nil {
		s.err = errBodyTooLarge
	}
}

func (s *callStream) Close() error { return s.body.Close() }

// sessionStream is the SSE transport's session stream: one GET that
// carries every answer of the session. Like a callStream it hands the SDK
// whole events of at most the message bound, but an event does not say
// which request it answers until it is read, so:
//
//   - an event over the message bound is skipped, and the request it
//     answers fails: the one whose id its first bytes name when the server
//     puts the id first (as the Go SDK does), otherwise every request
//     waiting on the stream;
//   - the stream may carry at most the stream bound between two answers
//     to runnel's requests. Past it, every waiting request fails, the
//     stream is closed, and the session is over: later requests are
//     refused with the reason (headerTransport.ended).
type sessionStream struct {
	t      *headerTransport
	body   io.ReadCloser
	events *eventReader
	lim    limits
	left   int64 // what the server may still send before its next answer

	skipping bool // in the middle of an event over the message bound
	buffered

	closeOnce sync.Once
	closed    chan struct{}
}

// errStreamCut is what a sessionStream holds once a bound ended it: Read
// blocks until the SDK closes the stream, so that the error answers handed
// to it are read before the session sees the stream end.
var errStreamCut = errors.New("the MCP server's SSE stream was cut")

func newSessionStream(t *headerTransport, body io.ReadCloser, lim limits) *sessionStream {
	return &sessionStream{t: t, body: body, events: newEventReader(body, lim.message), lim: lim,
		left: lim.stream, closed: make(chan struct{})}
}

func (s *sessionStream) Read(p []byte) (int, error) {
	n, err := s.read(p, s.next)
	if n == 0 && err == errStreamCut {
		<-s.closed
		return 0, io.EOF
	}
	return n, err
}

func (s *sessionStream) next() {
	if s.skipping {
		n, done, err := s.events.skip(max(s.left, 0))
		s.left -= n
		switch {
		case err != nil:
			s.err = err
		case !done:
			s.cut()
		}
		s.skipping = false
		return
	}
	raw, tooLarge, err := s.events.next()
	s.left -= int64(len(raw))
	switch {
	case tooLarge:
		s.out = s.t.pending.fail(sniffID(eventData(raw)), codeMessageTooLarge, s.lim)
		s.skipping = true
	case s.left < 0:
		s.cut()
	default:
		s.out, s.err = raw, err
		data := eventData(raw)
		if id, ok := answerID(data); ok {
			if ex := s.t.pending.answered(id); ex != nil {
				s.left = s.lim.stream
				if ex.listsTooMany(data, s.lim) {
					s.out = asEvent(ex.forge(codeTooManyTools, s.lim))
				}
			}
		}
	}
}

// cut ends the session: every waiting request fails, later ones are
// refused, and the server's stream is closed.
func (s *sessionStream) cut() {
	s.t.end("the session ended: the MCP server " + sseTooLong(s.lim))
	s.out = s.t.pending.fail(nil, codeStreamTooLong, s.lim)
	s.err = errStreamCut
	_ = s.body.Close()
}

func sseTooLong(l limits) string {
	return "sent more than " + byteSize(l.stream) + " on its SSE stream without answering, the most runnel reads while it waits for one answer"
}

func (s *sessionStream) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	return s.body.Close()
}

// pendingRequests are the requests waiting for an answer on a session
// stream, by id.
type pendingRequests struct {
	mu  sync.Mutex
	ids map[string]*exchange
}

func (p *pendingRequests) add(id json.RawMessage, ex *exchange) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ids == nil {
		p.ids = make(map[string]*exchange)
	}
	p.ids[string(bytes.TrimSpace(id))] = ex
}

// answered takes id off the list and returns its exchange, or nil when
// it was not on it.
func (p *pendingRequests) answered(id json.RawMessage) *exchange {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := string(bytes.TrimSpace(id))
	ex := p.ids[key]
	delete(p.ids, key)
	return ex
}

// fail takes the request id off the list (every request, when id is nil
// or not on the list) and returns the error answers that end them.
func (p *pendingRequests) fail(id json.RawMessage, code int, l limits) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	failed := p.ids
	if ex, ok := p.ids[string(bytes.TrimSpace(id))]; ok && id != nil {
		failed = map[string]*exchange{string(bytes.TrimSpace(id)): ex}
	}
	var out []byte
	for key, ex := range failed {
		out = append(out, asEvent(ex.forge(code, l))...)
		delete(p.ids, key)
	}
	return out
}

// eventData returns the data of an SSE event's raw lines, as the SDK reads
// it: the data lines, trimmed and joined by newlines.
func eventData(raw []byte) []byte {
	var data []byte
	first := true
	for line := range bytes.Lines(raw) {
		field, value, found := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(":"))
		if !found || string(field) != "data" {
			continue
		}
		if !first {
			data = append(data, '\n')
		}
		data = append(data, bytes.TrimSpace(value)...)
		first = false
	}
	return data
}

// answerID returns the id of a JSON-RPC answer.
func answerID(data []byte) (json.RawMessage, bool) {
	var msg struct {
		ID     json.RawMessage  `json:"id"`
		Method *json.RawMessage `json:"method"`
	}
	if json.Unmarshal(data, &msg) != nil || msg.Method != nil || msg.ID == nil {
		return nil, false
	}
	return msg.ID, true
}

// sniffID returns the id of a JSON-RPC message from its first bytes, when
// the id comes before the field that made the message too large; or nil.
func sniffID(prefix []byte) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(prefix))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil
		}
		if key == "id" {
			return value
		}
	}
	return nil
}
