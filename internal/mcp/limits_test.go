package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// hugeBytes is the size of the answers the hostile servers send: far more
// than runnel may hold.
const hugeBytes = 200 << 20

// allocBound is the most the test process may allocate while runnel meets
// a hostile answer: a few messages' worth (4 MiB each) plus the test
// server's own writing, where reading such an answer whole cost 2.6 to
// 3.3 GiB before the bounds (and an endless tool list, tens of GiB).
// Allocation is counted, not the heap's peak: it is what grows with the
// size of an answer read whole.
const allocBound = 64 << 20

// hangGuard bounds a call that would never end without the limits under
// test; it is a guard against a hung test, not a timing assertion.
const hangGuard = 2 * time.Minute

// TestOversizedResult sends a 200 MB tool result over each way an answer
// can arrive. The call fails with a sentence for the model, runnel reads
// a bounded part of it, and the session goes on.
func TestOversizedResult(t *testing.T) {
	tests := []struct {
		name string
		o    hostileOptions
		// size is the size of the forged answer.
		size int
		// sessionEnds is true when the answer is too big to skip: on the
		// SSE transport the stream is the session.
		sessionEnds bool
		answer      forge
	}{
		{name: "streamable, JSON answer", size: hugeBytes, answer: hugeAnswer(false)},
		{name: "streamable, event-stream answer", size: hugeBytes, answer: hugeAnswer(true)},
		{name: "sse transport, answer skipped", o: hostileOptions{sse: true}, size: 6 << 20, answer: hugeOnSessionStream(6 << 20)},
		{name: "sse transport, answer that never ends", o: hostileOptions{sse: true}, size: hugeBytes, sessionEnds: true, answer: hugeOnSessionStream(hugeBytes)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHostile(t, tt.o, tt.answer)
			spec := httpSpec("h", h.url)
			if tt.o.sse {
				spec.Transport = TransportSSE
			}
			pool := Connect(t.Context(), []ServerSpec{spec}, allowLoopback())
			defer pool.Close()
			if n := pool.Notices(); len(n) != 0 {
				t.Fatalf("notices: %q", n)
			}
			ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
			defer cancel()
			var res Result
			var err error
			alloc := allocatedDuring(func() { res, err = pool.Call(ctx, "mcp__h__huge", nil) })
			want := `MCP server "h": the answer to "huge" is larger than 4 MiB, the most runnel reads of one MCP message; ask the tool for less`
			if err == nil || err.Error() != want {
				t.Errorf("call = %d bytes, %v\nwant error %q", len(res.Content), err, want)
			}
			t.Logf("the call allocated %s", mib(alloc))
			if alloc > allocBound {
				t.Errorf("the call allocated %s for a %s answer; want at most %s", mib(alloc), mib(uint64(tt.size)), mib(allocBound))
			}
			res, err = pool.Call(ctx, "mcp__h__echo", json.RawMessage(`{"text":"after"}`))
			switch {
			case tt.sessionEnds:
				// The next call was refused, or failed waiting if it was sent
				// while the rest of the answer was being read.
				if err == nil || !strings.Contains(err.Error(), "sent more than 16 MiB") {
					t.Errorf("a call after the stream was cut = %+v, %v; want the reason the session ended", res, err)
				}
			case err != nil || res.Content != "echo: after":
				t.Errorf("the session did not survive: %+v, %v", res, err)
			}
		})
	}
}

// hugeAnswer forges a 200 MB answer to tools/call "huge" on the POST's own
// response, as JSON or as an event stream.
func hugeAnswer(stream bool) forge {
	return func(_ *hostile, w http.ResponseWriter, _ *http.Request, call hostileCall) bool {
		if call.Method != "tools/call" || call.Params.Name != "huge" {
			return false
		}
		if !stream {
			_ = writeHugeResult(jsonAnswer(w), call.ID, hugeBytes)
			return true
		}
		out := sseAnswer(w)
		if _, err := io.WriteString(out, "event: message\ndata: "); err != nil {
			return true
		}
		if writeHugeResult(out, call.ID, hugeBytes) == nil {
			_, _ = io.WriteString(out, "\n\n")
		}
		return true
	}
}

// hugeOnSessionStream forges an answer of size bytes to tools/call "huge"
// on the SSE transport's session stream.
func hugeOnSessionStream(size int) forge {
	return func(h *hostile, w http.ResponseWriter, _ *http.Request, call hostileCall) bool {
		if call.Method != "tools/call" || call.Params.Name != "huge" {
			return false
		}
		accepted(w)
		_ = h.inject(func(out io.Writer) error {
			if _, err := io.WriteString(out, "event: message\ndata: "); err != nil {
				return err
			}
			if err := writeHugeResult(out, call.ID, size); err != nil {
				return err
			}
			_, err := io.WriteString(out, "\n\n")
			return err
		})
		return true
	}
}

// notice is an 8 KiB notifications/message event: what an endless stream
// is made of.
func notice(id int) string {
	return fmt.Sprintf("id: %d\nretry: 1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"%s\"}}\n\n",
		id, strings.Repeat("n", 8<<10))
}

// TestEndlessStream answers a call with notifications that never end: on
// the POST's stream, across reconnections (the stream resumes forever with
// new event ids), and on the SSE transport's session stream. The call
// fails once the stream has carried MaxStreamBytes without its answer.
func TestEndlessStream(t *testing.T) {
	endless := func(out io.Writer, from int) {
		for i := from; ; i++ {
			if _, err := io.WriteString(out, notice(i)); err != nil {
				return
			}
		}
	}
	// A stream that ends after 64 events (512 KiB, under the limit), and is
	// resumed by a GET that does the same, forever.
	resumed := func(out io.Writer, from int) {
		for i := from; i < from+64; i++ {
			if _, err := io.WriteString(out, notice(i)); err != nil {
				return
			}
		}
	}
	tests := []struct {
		name   string
		o      hostileOptions
		answer forge
	}{
		{"one stream", hostileOptions{}, func(_ *hostile, w http.ResponseWriter, _ *http.Request, call hostileCall) bool {
			if call.Params.Name != "huge" {
				return false
			}
			endless(sseAnswer(w), 1)
			return true
		}},
		{"resumed forever", hostileOptions{}, func(_ *hostile, w http.ResponseWriter, r *http.Request, call hostileCall) bool {
			switch {
			case call.Params.Name == "huge":
				resumed(sseAnswer(w), 1)
				return true
			case r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "":
				var last int
				fmt.Sscan(r.Header.Get("Last-Event-ID"), &last)
				resumed(sseAnswer(w), last+1)
				return true
			}
			return false
		}},
		{"sse transport", hostileOptions{sse: true}, func(h *hostile, w http.ResponseWriter, _ *http.Request, call hostileCall) bool {
			if call.Params.Name != "huge" {
				return false
			}
			accepted(w)
			_ = h.inject(func(out io.Writer) error { endless(out, 1); return nil })
			return true
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHostile(t, tt.o, tt.answer)
			spec := httpSpec("h", h.url)
			if tt.o.sse {
				spec.Transport = TransportSSE
			}
			opts := allowLoopback()
			opts.MaxMessageBytes, opts.MaxStreamBytes = 64<<10, 1<<20
			pool := Connect(t.Context(), []ServerSpec{spec}, opts)
			defer pool.Close()
			if n := pool.Notices(); len(n) != 0 {
				t.Fatalf("notices: %q", n)
			}
			ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
			defer cancel()
			res, err := pool.Call(ctx, "mcp__h__huge", nil)
			if err == nil || !strings.Contains(err.Error(), "sent more than 1 MiB") {
				t.Errorf("call = %+v, %v; want the stream cut at 1 MiB", res, err)
			}
		})
	}
}

// TestToolListBounds lists tools from servers that advertise too many, or
// too much: the server is left out, and the notice says why.
func TestToolListBounds(t *testing.T) {
	toolName := func(i int) string { return "t" + strconv.Itoa(1_000_000 + i)[1:] }
	list := func(n int, next string) forge {
		return func(_ *hostile, w http.ResponseWriter, _ *http.Request, call hostileCall) bool {
			if call.Method != "tools/list" {
				return false
			}
			_ = writeToolList(jsonAnswer(w), call.ID, n, toolName, next)
			return true
		}
	}
	const tooMany = `MCP server "h" is unavailable for this run: it lists more than 512 tools, the most runnel takes from one server; a partial list would offer an arbitrary part of it, so none is used.`
	tests := []struct {
		name, want string
		answer     forge
		// alloc is the most connecting may allocate, when not allocBound.
		alloc uint64
	}{
		{"100,000 tools in one answer",
			`MCP server "h" is unavailable for this run: its answer to tools/list is larger than 4 MiB, the most runnel reads of one MCP message.`,
			list(100_000, ""), 0},
		{"80,000 tools in 4 MiB", tooMany, list(80_000, ""), 0},
		{"2,000 tools", tooMany, list(2_000, ""), 0},
		{"pagination that never ends", tooMany, list(100, "again"), 0},
		// Every page counts as a tool, so this is 513 round trips, and the
		// SDK allocates 100 to 200 KiB on each (its JSON decoder takes 32 KiB
		// per value).
		{"empty pages that never end", tooMany, list(0, "again"), 192 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHostile(t, hostileOptions{}, tt.answer)
			opts := allowLoopback()
			opts.ConnectTimeout = hangGuard
			var pool *Pool
			alloc := allocatedDuring(func() { pool = Connect(t.Context(), []ServerSpec{httpSpec("h", h.url)}, opts) })
			defer pool.Close()
			if diff := cmp.Diff([]string{tt.want}, pool.Notices()); diff != "" {
				t.Errorf("notices (-want +got):\n%s", diff)
			}
			if n := len(pool.Tools()); n != 0 {
				t.Errorf("%d tools offered from a server left out", n)
			}
			t.Logf("connecting allocated %s", mib(alloc))
			bound := tt.alloc
			if bound == 0 {
				bound = allocBound
			}
			if alloc > bound {
				t.Errorf("connecting allocated %s; want at most %s", mib(alloc), mib(bound))
			}
		})
	}
}

func TestMaxToolsIsConfigurable(t *testing.T) {
	f := newFixture(t, fixtureOptions{pageSize: 2}) // 7 tools over 4 pages
	for _, tt := range []struct {
		max   int
		tools int
	}{{7, 7}, {6, 0}} {
		opts := allowLoopback()
		opts.MaxTools = tt.max
		pool := Connect(t.Context(), []ServerSpec{httpSpec("mem", f.url)}, opts)
		if n := len(pool.Tools()); n != tt.tools {
			t.Errorf("MaxTools %d: %d tools, want %d; notices %q", tt.max, n, tt.tools, pool.Notices())
		}
		if err := pool.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOversizedInitialize: a server whose answer to initialize is too big
// to read is left out, and the notice says so.
func TestOversizedInitialize(t *testing.T) {
	h := newHostile(t, hostileOptions{}, func(_ *hostile, w http.ResponseWriter, _ *http.Request, call hostileCall) bool {
		if call.Method != "initialize" {
			return false
		}
		_ = writeHugeResult(jsonAnswer(w), call.ID, hugeBytes)
		return true
	})
	var pool *Pool
	alloc := allocatedDuring(func() { pool = Connect(t.Context(), []ServerSpec{httpSpec("h", h.url)}, allowLoopback()) })
	defer pool.Close()
	want := []string{`MCP server "h" is unavailable for this run: its answer to initialize is larger than 4 MiB, the most runnel reads of one MCP message.`}
	if diff := cmp.Diff(want, pool.Notices()); diff != "" {
		t.Errorf("notices (-want +got):\n%s", diff)
	}
	if alloc > allocBound {
		t.Errorf("connecting allocated %s; want at most %s", mib(alloc), mib(allocBound))
	}
}
