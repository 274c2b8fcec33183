package provider

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// The helpers in this file are the HTTP and event-stream plumbing every
// adapter shares. Adapters build their request bodies themselves with
// encoding/json and read the answer with an EventReader: the vendor SDKs'
// reflective request encoders re-encoded the whole conversation on every
// step at several times the cost of encoding/json (docs/decisions.md,
// "Providers"), and their stream decoders could not tell a finished stream
// from a cut one anyway.

// StreamRequest is one streaming POST to a model API.
type StreamRequest struct {
	// API names the API in messages, e.g. "openai chat completions".
	API string
	URL string
	// Header carries authentication and configured headers. OpenStream
	// sends a copy, so one Header may serve concurrent requests.
	Header http.Header
	Body   []byte
	// Parts, when set, is the body in pieces, sent in order without being
	// joined: the earlier messages' cached encodings go out as they are.
	Parts [][]byte
	// Secret is removed from any message the server sends back; some
	// servers echo the key they were given.
	Secret string
}

// OpenStream posts r as JSON with client and returns the response once it
// is a 2xx event stream; the caller closes its body. Every failure comes
// back classified for WithPolicy: context.Cause(ctx) when ctx ended, a
// ConnError when no response arrived, an HTTPError carrying the API's own
// message for a status of 300 or more, and a non-retryable *Error for a
// 2xx answer that is not an event stream (a server that ignored
// "stream": true).
func OpenStream(ctx context.Context, client *http.Client, r *StreamRequest) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL, http.NoBody)
	if err != nil {
		// The URL was checked when the adapter was built; its text may
		// hold credentials, so it is not repeated here.
		return nil, &Error{Message: r.API + ": the request could not be built", Err: err}
	}
	req.Header = r.Header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	req.Header.Set("Content-Type", "application/json")
	// The transport keeps the request for as long as the response streams;
	// the body, a whole conversation, need not stay with it. GetBody (for
	// a redirect or a retry on a stale connection) can rewind it only
	// until Do returns.
	parts := r.Parts
	if parts == nil {
		parts = [][]byte{r.Body}
	}
	held := &heldBody{parts: parts}
	for _, p := range parts {
		req.ContentLength += int64(len(p))
	}
	req.Body, _ = held.open()
	req.GetBody = held.open
	res, err := client.Do(req)
	held.release()
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, ConnError(r.API, err)
	}
	if res.StatusCode >= 300 {
		body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		_ = res.Body.Close()
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, HTTPError(r.API, res.StatusCode, res.Header, Scrub(ErrorDetail(body), r.Secret))
	}
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	if mt != "" && mt != "text/event-stream" {
		_ = res.Body.Close()
		return nil, &Error{Status: res.StatusCode, Message: r.API + ": the server answered with " + mt + " instead of an event stream"}
	}
	return res, nil
}

// heldBody hands out readers of a request body until it is released.
// Each reader lets go of the bytes when closed: the transport closes a
// request body once it is written.
type heldBody struct {
	mu    sync.Mutex
	parts [][]byte
}

func (h *heldBody) open() (io.ReadCloser, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.parts == nil {
		return nil, errors.New("the request body was already sent")
	}
	return &bodyReader{r: &partsReader{parts: h.parts}}, nil
}

func (h *heldBody) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.parts = nil
}

// partsReader reads a body held in pieces.
type partsReader struct {
	parts [][]byte
	i     int // the part being read
	off   int // how much of it was read
}

func (r *partsReader) Read(p []byte) (int, error) {
	for r.i < len(r.parts) {
		rest := r.parts[r.i][r.off:]
		if len(rest) == 0 {
			r.i, r.off = r.i+1, 0
			continue
		}
		n := copy(p, rest)
		r.off += n
		return n, nil
	}
	return 0, io.EOF
}

// WriteTo writes the parts one by one: a large part goes past the
// transport's buffer in one write.
func (r *partsReader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for ; r.i < len(r.parts); r.i, r.off = r.i+1, 0 {
		n, err := w.Write(r.parts[r.i][r.off:])
		total += int64(n)
		r.off += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// bodyReader is a request body that drops its bytes when closed. The
// transport may close it from another goroutine than the one reading, so
// the reader is taken under a lock, but never held across a write to the
// network.
type bodyReader struct {
	mu sync.Mutex
	r  *partsReader
}

func (b *bodyReader) reader() (*partsReader, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.r == nil {
		return nil, errors.New("read of a closed request body")
	}
	return b.r, nil
}

func (b *bodyReader) Read(p []byte) (int, error) {
	r, err := b.reader()
	if err != nil {
		return 0, err
	}
	return r.Read(p)
}

// WriteTo lets the transport write the body in one piece rather than
// through its 4 KiB buffer.
func (b *bodyReader) WriteTo(w io.Writer) (int64, error) {
	r, err := b.reader()
	if err != nil {
		return 0, err
	}
	return r.WriteTo(w)
}

func (b *bodyReader) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.r = nil
	return nil
}

// SameOriginClient returns a copy of hc (nil means a default client) that
// follows a redirect only within the origin of the first request, as the
// vendor SDKs do: headers such as api-key or x-api-key carry credentials,
// and net/http forwards them to any host. A redirect elsewhere comes back
// as its 3xx response, which OpenStream reports as an HTTP error.
func SameOriginClient(hc *http.Client) *http.Client {
	c := &http.Client{}
	if hc != nil {
		*c = *hc
	}
	next := c.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if !sameOrigin(req.URL, via[0].URL) {
			return http.ErrUseLastResponse
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return c
}

func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) &&
		port(a) == port(b)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return "443"
	case "http":
		return "80"
	}
	return ""
}

// EndpointURL is path resolved against base, the way the vendor SDKs
// resolve it: base is a directory whether or not it ends in a slash, so
// "https://host/v1" and "https://host/v1/" both give
// "https://host/v1/chat/completions". query, if not nil, is added. The
// error says only that base is not a URL: its text may hold credentials.
func EndpointURL(base, path string, query url.Values) (string, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "", errors.New("the base URL is not an absolute URL")
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
		if u.RawPath != "" {
			u.RawPath += "/"
		}
	}
	u = u.ResolveReference(&url.URL{Path: path})
	if len(query) > 0 {
		q := u.Query()
		for k, vs := range query {
			for _, v := range vs {
				q.Add(k, v)
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.String(), nil
}

// ErrorDetail extracts an API's message from an error body: OpenAI's
// {"error":{"message"}}, Anthropic's {"error":{"type","message"}}, and what
// compatible servers send: {"error":"text"}, {"message"}, {"detail"} or
// plain text. An HTML error page says nothing useful and gives "".
func ErrorDetail(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return ""
	}
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(b, &v) == nil {
		var nested struct {
			Message string `json:"message"`
		}
		var s string
		switch {
		case json.Unmarshal(v.Error, &nested) == nil && nested.Message != "":
			return OneLine(nested.Message)
		case json.Unmarshal(v.Error, &s) == nil && s != "":
			return OneLine(s)
		case v.Message != "":
			return OneLine(v.Message)
		case json.Unmarshal(v.Detail, &s) == nil && s != "":
			return OneLine(s)
		case len(v.Detail) > 0:
			return OneLine(string(v.Detail))
		}
		return ""
	}
	if b[0] == '<' {
		return ""
	}
	return OneLine(string(b))
}

// OneLine folds s onto one line of at most 500 bytes (plus an ellipsis).
func OneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s
}

// Scrub removes secret from s.
func Scrub(s, secret string) string {
	if secret == "" {
		return s
	}
	return strings.ReplaceAll(s, secret, "[redacted]")
}

// EventReader reads a text/event-stream: lines of "field: value", an event
// ending at a blank line. Its buffer is small (512 bytes, room for a
// typical chunk's line) because a streaming
// run holds it for as long as the model streams; a longer line is
// assembled in a separate, reused buffer.
type EventReader struct {
	br   *bufio.Reader
	long []byte // a line longer than br's buffer
	name []byte
	data []byte
	err  error
}

const (
	eventBufferSize = 512
	// maxEventSize bounds one event's data (the OpenAI SDK's limit); a
	// Responses API response.completed event repeats the whole answer.
	maxEventSize = 32 << 20
)

// errEventTooLarge is the error for an event beyond maxEventSize.
var errEventTooLarge = fmt.Errorf("an event is larger than %d MiB", maxEventSize>>20)

// NewEventReader returns a reader of r.
func NewEventReader(r io.Reader) *EventReader {
	return &EventReader{br: bufio.NewReaderSize(r, eventBufferSize)}
}

// Next reads up to the end of the next event that has data, skipping
// comments and events without a data line. It returns false at the end
// of the stream or on a read error (see Err). An event not ended by a
// blank line before the stream ends is dropped, as the format requires.
func (e *EventReader) Next() bool {
	if e.err != nil {
		return false
	}
	e.name, e.data = e.name[:0], e.data[:0]
	hasData := false
	for {
		line, err := e.line()
		if err != nil {
			e.err = err
			return false
		}
		if len(line) == 0 {
			if hasData {
				return true
			}
			e.name = e.name[:0]
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		switch string(field) {
		case "event":
			e.name = append(e.name[:0], value...)
		case "data":
			if hasData {
				e.data = append(e.data, '\n')
			}
			hasData = true
			if len(e.data)+len(value) > maxEventSize {
				e.err = errEventTooLarge
				return false
			}
			e.data = append(e.data, value...)
		}
	}
}

// line returns the next line without its line ending, valid until the
// next call.
func (e *EventReader) line() ([]byte, error) {
	line, err := e.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		e.long = append(e.long[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			if len(e.long) > maxEventSize {
				return nil, errEventTooLarge
			}
			line, err = e.br.ReadSlice('\n')
			e.long = append(e.long, line...)
		}
		line = e.long
	}
	if err != nil {
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// Name is the current event's type from its event: line ("" without one).
// Like Data, it is valid until the next call of Next.
func (e *EventReader) Name() []byte { return e.name }

// Data is the current event's data lines joined by newlines.
func (e *EventReader) Data() []byte { return e.data }

// Err is the error that stopped Next, or nil at a clean end of the stream
// (which may still have come before the API's terminating event).
func (e *EventReader) Err() error {
	if errors.Is(e.err, io.EOF) {
		return nil
	}
	return e.err
}
