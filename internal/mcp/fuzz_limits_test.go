package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// chunked reads data in the pieces sizes says (cycled; a 0 is 1), the way
// a pipe or a socket hands a stream over.
type chunked struct {
	data  []byte
	sizes []byte
	n     int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	size := 1
	if len(c.sizes) > 0 {
		size = max(1, int(c.sizes[c.n%len(c.sizes)]))
		c.n++
	}
	n := copy(p[:min(len(p), size)], c.data)
	c.data = c.data[n:]
	return n, nil
}

func (c *chunked) Close() error { return nil }

// FuzzLineBound fuzzes the bound on a stdio server's lines, however its
// output is cut into reads: no line longer than the bound is handed on
// (the SDK would buffer it whole), a stream without one comes through
// unchanged, and the error is the bound's.
func FuzzLineBound(f *testing.F) {
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n{\"id\":2}\n"), []byte{200}, uint8(40))
	f.Add([]byte("aaaaaaaa\nb\n"), []byte{10}, uint8(4))
	f.Add([]byte("abc\nabcd\nabcde"), []byte{1, 2, 3}, uint8(4))
	f.Add([]byte("\n\n\n"), []byte{}, uint8(0))
	f.Fuzz(func(t *testing.T, stream, sizes []byte, limit uint8) {
		b := &lineBound{r: &chunked{data: stream, sizes: sizes}, limit: int64(limit)}
		var out []byte
		var err error
		buf := make([]byte, 64)
		for range len(stream) + 2 {
			var n int
			n, err = b.Read(buf)
			out = append(out, buf[:n]...)
			if err != nil {
				break
			}
		}
		longest := 0
		for line := range bytes.SplitSeq(out, []byte("\n")) {
			longest = max(longest, len(line))
		}
		if longest > int(limit) {
			t.Fatalf("a line of %d bytes was handed on past the bound of %d", longest, limit)
		}
		over := false
		for line := range bytes.SplitSeq(stream, []byte("\n")) {
			over = over || len(line) > int(limit)
		}
		switch {
		case over && !errors.Is(err, errLineTooLong):
			t.Fatalf("a stream with a line over %d bytes ended with %v", limit, err)
		case !over && (err != io.EOF || !bytes.Equal(out, stream)):
			t.Fatalf("a stream within the bound came out as %q, %v; want %q", out, err, stream)
		case over != b.over.Load():
			t.Fatalf("over = %v for a stream with a line over the bound: %v", b.over.Load(), over)
		}
	})
}

// FuzzAnswerStream fuzzes the reader between an answer's event stream and
// the SDK (callStream): with small bounds on one event, on the stream and
// on a tools/list answer's tools, every event it hands on is within the
// event bound, what it hands on in all is within the stream bound (and
// then the server's events, unchanged), a tools/list answer over the
// tools bound never reaches the SDK, and a stream cut by a bound ends
// with a JSON-RPC error answer to the request, recorded in its exchange.
func FuzzAnswerStream(f *testing.F) {
	for _, s := range []string{
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"tools\":[{\"name\":\"a\"},{\"name\":\"b\"}]}}\n\n",
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n: keep-alive\n\nid: 2\ndata: {\"id\":7,\"result\":{}}\n\n",
		"data: {\"id\":7,\"result\":{\"tools\":[1,2,3,4,5]}}\n\n",
		"data: " + strings.Repeat("x", 300) + "\n\n",
		"data: {\"id\":7,\n\ndata: \"result\":{}}\n\n",
	} {
		f.Add([]byte(s), true, uint8(200), uint16(1000), uint8(3))
		f.Add([]byte(s), false, uint8(40), uint16(120), uint8(0))
	}
	f.Fuzz(func(t *testing.T, stream []byte, list bool, message uint8, budget uint16, tools uint8) {
		lim := limits{message: int64(message) + 8, stream: int64(budget), tools: int(tools)}
		method := "tools/call"
		if list {
			method = "tools/list"
		}
		ex := &exchange{}
		ex.begin(json.RawMessage(`7`), method, lim.stream)
		s := newCallStream(&chunked{data: stream, sizes: []byte{7, 200, 1}}, ex, lim)
		var events [][]byte
		var err error
		for range len(stream) + 4 {
			s.next()
			if len(s.out) > 0 {
				events = append(events, bytes.Clone(s.out)) // valid until the next call
			}
			s.out = nil
			if err = s.err; err != nil {
				break
			}
		}
		cut := ex.breach()
		var passed []byte
		for i, ev := range events {
			last := i == len(events)-1
			if cut != 0 && last {
				checkForged(t, ev, cut)
				break
			}
			if int64(len(ev)) > lim.message+2 {
				t.Fatalf("an event of %d bytes passed the bound of %d", len(ev), lim.message)
			}
			if list && ex.listsTooMany(eventData(ev), lim) {
				t.Fatalf("a tools/list answer with more than %d tools reached the SDK: %q", lim.tools, ev)
			}
			passed = append(passed, ev...)
		}
		if int64(len(passed)) > lim.stream {
			t.Fatalf("%d bytes passed a stream bound of %d", len(passed), lim.stream)
		}
		if !bytes.HasPrefix(stream, passed) {
			t.Fatalf("the events handed on, %q, are not the server's, %q", passed, stream)
		}
		if cut == 0 && err == io.EOF && !bytes.Equal(passed, stream) {
			t.Fatalf("an uncut stream came out as %q, want %q", passed, stream)
		}
	})
}

// checkForged checks the error answer that replaces an answer a bound
// cut: an SSE message event whose data is a JSON-RPC error to id 7 with
// the bound's code.
func checkForged(t *testing.T, ev []byte, code int) {
	t.Helper()
	var msg struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if !bytes.HasPrefix(ev, []byte("event: message\ndata: ")) || json.Unmarshal(eventData(ev), &msg) != nil ||
		msg.JSONRPC != "2.0" || string(msg.ID) != "7" || msg.Error.Code != code || !strings.HasPrefix(msg.Error.Message, "the MCP server") {
		t.Fatalf("the stream cut with code %d ended with %q, not its error answer", code, ev)
	}
}

// FuzzToolResult fuzzes what the model reads of an MCP server's tools/call
// result, as the SDK decodes it: text within the output bound (plus the
// note of what was cut), cut on a character boundary, and the result's
// isError.
func FuzzToolResult(f *testing.F) {
	for _, s := range []string{
		`{"content":[{"type":"text","text":"18°C and sunny"}],"isError":false}`,
		`{"content":[{"type":"image","data":"iVBORw0K","mimeType":"image/png"},{"type":"audio","data":"AAAA"},{"type":"resource_link","uri":"file:///a","name":"a","mimeType":"text/plain"}]}`,
		`{"content":[{"type":"resource","resource":{"uri":"file:///b","mimeType":"text/plain","text":"hello"}},{"type":"resource","resource":{"uri":"file:///c","blob":"AAAA"}}],"isError":true}`,
		`{"content":[],"structuredContent":{"temp":21,"unit":"C"}}`,
		`{"content":[{"type":"text","text":"ééééé"}]}`,
	} {
		f.Add([]byte(s), uint16(1000))
		f.Add([]byte(s), uint16(3))
	}
	f.Fuzz(func(t *testing.T, raw []byte, bound uint16) {
		var res mcp.CallToolResult
		if json.Unmarshal(raw, &res) != nil {
			return // the SDK refuses it: the call fails before runnel reads a result
		}
		max := int(bound)
		r := resultOf(&res, max)
		full := resultOf(&res, 1<<30).Content
		if r.IsError != res.IsError {
			t.Fatalf("isError %v became %v", res.IsError, r.IsError)
		}
		if !utf8.ValidString(r.Content) {
			t.Fatalf("the content is not valid UTF-8: %q", r.Content)
		}
		for _, text := range texts(&res) {
			if !strings.Contains(full, text) {
				t.Fatalf("the text %q is not in what the model reads, %q", text, full)
			}
		}
		if len(full) <= max {
			if r.Content != full {
				t.Fatalf("content within the bound came out as %q, want %q", r.Content, full)
			}
			return
		}
		// Cut on a character boundary at most 3 bytes before the bound,
		// with a note of how much was left out.
		kept := full[:0]
		for cut := max; cut >= max-3 && cut >= 0; cut-- {
			if utf8.RuneStart(full[cut]) || cut == 0 {
				kept = full[:cut]
				break
			}
		}
		if want := fmt.Sprintf("%s [... %d bytes omitted]", kept, len(full)-len(kept)); r.Content != want {
			t.Fatalf("content over the bound of %d came out as %q, want %q", max, r.Content, want)
		}
	})
}

func texts(res *mcp.CallToolResult) []string {
	var out []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return out
}

// FuzzToolNames fuzzes the names runnel gives an MCP server's tools
// (names a server chooses, split at NUL here): each is one every provider
// accepts (at most 64 bytes of [A-Za-z0-9_-]), none is handed out twice,
// and a tool's name is the same from one run to the next.
func FuzzToolNames(f *testing.F) {
	f.Add("mem", "read_graph\x00files.read\x00files_read\x00\x00"+strings.Repeat("t", 70))
	f.Add("x_", "_y\x00__y\x00ünïcode/tool")
	f.Fuzz(func(t *testing.T, server, tools string) {
		if !validServerName(server) {
			server = "s"
		}
		taken, again := map[string]bool{}, map[string]bool{}
		for tool := range strings.SplitSeq(tools, "\x00") {
			name := qualifiedName(server, tool, taken)
			if len(name) > maxToolNameLen || taken[name] || !strings.HasPrefix(name, "mcp__"+server+"__") {
				t.Fatalf("tool %q named %q: too long, taken, or without its server's prefix", tool, name)
			}
			for i := range len(name) {
				if !toolNameByte(name[i]) {
					t.Fatalf("tool %q named %q, which holds a byte providers refuse", tool, name)
				}
			}
			taken[name] = true
			if next := qualifiedName(server, tool, again); next != name {
				t.Fatalf("tool %q named %q, then %q", tool, name, next)
			}
			again[name] = true
		}
	})
}
