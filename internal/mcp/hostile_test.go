package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hostile is a real go-sdk MCP server (the fixture's tools, plus "huge"
// and "drop") behind a handler that answers some requests itself, the way
// a broken or malicious server would. The protocol is real; only the
// answers a test names are forged, and they are written straight to the
// socket from a small reused buffer, so a 200 MB answer costs the test
// process almost nothing and the memory it measures is runnel's.
type hostile struct {
	url string

	mu     sync.Mutex
	stream *injectingWriter // the SSE transport's session stream, once open
}

// hostileCall is the part of a JSON-RPC request the hostile handlers look at.
type hostileCall struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name   string `json:"name"`
		Cursor string `json:"cursor"`
	} `json:"params"`
}

// forge answers a request itself and reports true, or leaves it to the real
// server. call is zero for a request without a JSON-RPC body (a GET).
type forge func(h *hostile, w http.ResponseWriter, r *http.Request, call hostileCall) bool

type hostileOptions struct {
	sse  bool   // serve the SSE transport instead of streamable HTTP
	path string // the URL path; the real server answers on any path
}

func newHostile(t *testing.T, o hostileOptions, answer forge) *hostile {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "hostile", Version: "1"}, nil)
	addFixtureTools(server, &fixture{slowStarted: make(chan struct{}, 8), slowCancelled: make(chan struct{}, 8)})
	for _, name := range []string{"huge", "drop"} {
		server.AddTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "not forged"}}}, nil
			})
	}
	var real http.Handler
	if o.sse {
		real = mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return server }, nil)
	} else {
		real = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	}
	h := &hostile{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var call hostileCall
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			_ = json.Unmarshal(body, &call)
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		if answer(h, w, r, call) {
			return
		}
		if o.sse && r.Method == http.MethodGet {
			iw := &injectingWriter{ResponseWriter: w}
			h.mu.Lock()
			h.stream = iw
			h.mu.Unlock()
			real.ServeHTTP(iw, r)
			// Nothing may be written once the handler has returned.
			iw.mu.Lock()
			iw.closed = true
			iw.mu.Unlock()
			return
		}
		real.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	h.url = hs.URL + cmpOr(o.path, "/mcp")
	return h
}

// injectingWriter is the SSE session stream of a hostile server: the real
// server writes its events through it, and a forged event can be written
// between two of them.
type injectingWriter struct {
	http.ResponseWriter
	mu     sync.Mutex
	closed bool // the handler has returned
}

func (w *injectingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ResponseWriter.Write(p)
}

// FlushError is what http.ResponseController calls: the real server's
// flushes take the lock too.
func (w *injectingWriter) FlushError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *injectingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// inject writes one forged event on the session stream, whole.
func (h *hostile) inject(write func(w io.Writer) error) error {
	h.mu.Lock()
	iw := h.stream
	h.mu.Unlock()
	iw.mu.Lock()
	defer iw.mu.Unlock()
	if iw.closed {
		return io.ErrClosedPipe
	}
	if err := write(flushing{iw.ResponseWriter}); err != nil {
		return err
	}
	return http.NewResponseController(iw.ResponseWriter).Flush()
}

// flushing flushes after every write, so a forged stream reaches the client
// as it is written.
type flushing struct{ http.ResponseWriter }

func (f flushing) Write(p []byte) (int, error) {
	n, err := f.ResponseWriter.Write(p)
	if err == nil {
		err = http.NewResponseController(f.ResponseWriter).Flush()
	}
	return n, err
}

// writeHugeResult writes a tools/call result whose text is n bytes of "x",
// in 32 KiB pieces; it stops at the first failed write (the client hung up).
func writeHugeResult(w io.Writer, id json.RawMessage, n int) error {
	if _, err := fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"`, id); err != nil {
		return err
	}
	chunk := bytes.Repeat([]byte("x"), 32<<10)
	for written := 0; written < n; written += len(chunk) {
		if _, err := w.Write(chunk); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, `"}]}}`)
	return err
}

// writeToolList writes a tools/list result with the tools named by name(0)
// to name(n-1), and nextCursor when it is not "".
// It writes through a buffer, so the test server allocates little.
func writeToolList(w io.Writer, id json.RawMessage, n int, name func(int) string, nextCursor string) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.WriteString(`{"jsonrpc":"2.0","id":`)
	bw.Write(id)
	bw.WriteString(`,"result":{"tools":[`)
	for i := range n {
		if i > 0 {
			bw.WriteString(",")
		}
		bw.WriteString(`{"name":"`)
		bw.WriteString(name(i))
		bw.WriteString(`","inputSchema":{"type":"object"}}`)
	}
	if nextCursor != "" {
		bw.WriteString(`],"nextCursor":"` + nextCursor + `"}}`)
	} else {
		bw.WriteString(`]}}`)
	}
	return bw.Flush()
}

// accepted answers a POST of the SSE transport, whose answer travels on
// the session stream.
func accepted(w http.ResponseWriter) {
	w.WriteHeader(http.StatusAccepted)
	_ = http.NewResponseController(w).Flush()
}

// jsonAnswer starts a streamable-HTTP answer in JSON.
func jsonAnswer(w http.ResponseWriter) io.Writer {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	return flushing{w}
}

// sseAnswer starts a streamable-HTTP answer as an event stream.
func sseAnswer(w http.ResponseWriter) io.Writer {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	return flushing{w}
}

// allocatedDuring returns what the whole test process allocated while f
// ran: a measure of memory, not of time.
func allocatedDuring(f func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// mib formats a byte count for a failure message.
func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// leaked returns the secrets s contains.
func leaked(s string, secrets ...string) []string {
	var out []string
	for _, secret := range secrets {
		if strings.Contains(s, secret) {
			out = append(out, secret)
		}
	}
	return out
}
