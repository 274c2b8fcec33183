package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/runnel/runnel/bench/internal/benchkit"
	"github.com/runnel/runnel/internal/llmtest"
)

// The tool each kind of run calls. Every run offers the model one tool,
// and the model calls it once, then answers "Done: " and the tool's
// result.
const (
	callbackTool = "lookup"     // a callback tool: runnel posts the envelope to /tools/call
	directTool   = "fetch_item" // a direct tool: runnel calls POST /api/items/{item}
	mcpServer    = "soak"       // the MCP server's name in the request
	mcpTool      = "count"      // its one tool, offered as mcp__soak__count
	directItem   = "soak-item"
	answerPrefix = "Done: "
)

// Tool kinds, as the -mix flag names them.
const (
	kindCallback = "callback"
	kindDirect   = "direct"
	kindMCP      = "mcp"
)

// paceTag marks a run's prompt with its pace, the index of the fake
// model's delay the run gets; the brackets keep "pace=1" from matching
// "pace=10".
func paceTag(pace int) string { return fmt.Sprintf("[pace=%d]", pace) }

// modelScript scripts the fake model. For each pace: a conversation whose
// last message is a tool result is answered with text quoting it; any
// other is answered with a call of the tool the request offers. The
// pieces of a reply are delay apart (a reply streams 6 to 8 events), so a
// model call takes about 6·delay and the runs overlap. A request no rule
// matches gets HTTP 400, which fails the run: a loud script bug.
func modelScript(delays []time.Duration) llmtest.Script {
	var rules []llmtest.Rule
	for pace, d := range delays {
		ms := int(d / time.Millisecond)
		tag := paceTag(pace)
		call := func(name, args string) llmtest.Rule {
			return llmtest.Rule{
				Name: fmt.Sprintf("call-%s-%d", name, pace),
				When: llmtest.Match{LastUserContains: tag, HasTool: name},
				Reply: llmtest.Reply{TokenDelayMs: ms, ToolCalls: []llmtest.ToolCall{
					{Name: name, Arguments: json.RawMessage(args)}}},
			}
		}
		rules = append(rules,
			llmtest.Rule{
				Name:  fmt.Sprintf("answer-%d", pace),
				When:  llmtest.Match{LastRole: llmtest.RoleTool, LastUserContains: tag},
				Reply: llmtest.Reply{Text: answerPrefix + "{{last_tool_result}}", TokenDelayMs: ms},
			},
			call(callbackTool, `{"query":"soak"}`),
			call(directTool, `{"item":"`+directItem+`"}`),
			call(mcpServer+"/"+mcpTool, `{"step":1}`),
		)
	}
	return llmtest.Script{Rules: rules}
}

// paceDelays are n per-event delays spread evenly so that a reply's
// pauses (about 6 per reply) add up to lo … hi.
func paceDelays(lo, hi time.Duration, n int) []time.Duration {
	const pausesPerReply = 6
	out := make([]time.Duration, n)
	for i := range n {
		total := lo
		if n > 1 {
			total = lo + (hi-lo)*time.Duration(i)/time.Duration(n-1)
		}
		out[i] = (total / pausesPerReply).Round(time.Millisecond)
	}
	return out
}

// The answers of the platform's tools. Each carries the id of the call it
// answers, so the run's final text proves the result it quotes is its own.
func callbackOutput(id string) string { return "looked up for " + id }
func directOutput(id string) string {
	return `{"item":"` + directItem + `","call":"` + id + `"}` // compact, as runnel passes JSON on
}
func mcpOutput(serial int64) string { return "mcp call " + strconv.FormatInt(serial, 10) }

// platform is the platform's side of the tools: the callback endpoint and
// the direct route, counting executions by tool call id (runnel sends the
// id in the envelope and, for a direct call, as Idempotency-Key), and an
// MCP server counting calls by session. Safe for concurrent use.
type platform struct {
	mu    sync.Mutex
	calls map[string]int // tool call id → executions not yet checked by its run
	// bad counts requests the tools refused (a malformed envelope, a
	// missing id): no run sends one unless runnel is wrong.
	bad atomic.Int64

	mcpSerial   atomic.Int64
	mcpLive     atomic.Int64 // sessions initialised and not yet closed
	mcpSessions atomic.Int64 // sessions ever initialised
	mcpMu       sync.Mutex
	mcpCalls    map[string]int // session id → tool calls, while it lives
	// mcpWrong counts the sessions that closed after a number of tool
	// calls other than one: every MCP run calls the tool once.
	mcpWrong atomic.Int64
	mcpWait  sync.WaitGroup // the goroutines waiting for sessions to close
	mcpSrv   *mcp.Server
}

func newPlatform() *platform {
	return &platform{calls: map[string]int{}, mcpCalls: map[string]int{}}
}

// handler serves POST /tools/call and POST /api/items/{item}.
func (p *platform) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /tools/call", p.callback)
	mux.HandleFunc("POST /api/items/{item}", p.direct)
	return mux
}

func (p *platform) callback(w http.ResponseWriter, r *http.Request) {
	id, name, err := benchkit.ReadToolCall(r)
	if err != nil || id == "" || name != callbackTool {
		p.bad.Add(1)
		http.Error(w, "bad envelope", http.StatusBadRequest)
		return
	}
	p.count(id)
	benchkit.WriteToolResult(w, id, callbackOutput(id))
}

func (p *platform) direct(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("Idempotency-Key")
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	if id == "" || r.PathValue("item") != directItem {
		p.bad.Add(1)
		http.Error(w, "no Idempotency-Key, or the wrong item", http.StatusBadRequest)
		return
	}
	p.count(id)
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, directOutput(id))
}

func (p *platform) count(id string) {
	p.mu.Lock()
	p.calls[id]++
	p.mu.Unlock()
}

// take is how often the call id ran, and forgets it: a run checks its own
// call once, at its end, so the map holds only the calls in flight. An
// execution after the check shows up in leftover.
func (p *platform) take(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.calls[id]
	delete(p.calls, id)
	return n
}

// leftover is the executions no run has claimed: after the load, each is
// a tool call that ran without its run seeing it, or ran again after.
func (p *platform) leftover() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.calls {
		n += c
	}
	return n
}

// mcpHandler is a streamable-HTTP MCP server with one tool, count, that
// answers a serial number unique across the soak.
func (p *platform) mcpHandler() http.Handler {
	p.mcpSrv = mcp.NewServer(&mcp.Implementation{Name: mcpServer, Version: "1"}, &mcp.ServerOptions{
		InitializedHandler: func(_ context.Context, req *mcp.InitializedRequest) {
			p.mcpLive.Add(1)
			p.mcpSessions.Add(1)
			id := req.Session.ID()
			p.mcpWait.Go(func() {
				_ = req.Session.Wait()
				p.mcpLive.Add(-1)
				p.mcpMu.Lock()
				n := p.mcpCalls[id]
				delete(p.mcpCalls, id)
				p.mcpMu.Unlock()
				if n != 1 {
					p.mcpWrong.Add(1)
				}
			})
		},
	})
	type countIn struct {
		Step int `json:"step"`
	}
	mcp.AddTool(p.mcpSrv, &mcp.Tool{Name: mcpTool, Description: "Counts a step.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *mcp.CallToolRequest, _ countIn) (*mcp.CallToolResult, any, error) {
			p.mcpMu.Lock()
			p.mcpCalls[req.Session.ID()]++
			p.mcpMu.Unlock()
			out := mcpOutput(p.mcpSerial.Add(1))
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: out}}}, nil, nil
		})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return p.mcpSrv }, nil)
}

// timedModel is the fake model's handler, timing each response from its
// request to its last byte.
type timedModel struct {
	h     *llmtest.Handler
	mu    sync.Mutex
	times []time.Duration
}

func (m *timedModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	m.h.ServeHTTP(w, r)
	d := time.Since(start)
	m.mu.Lock()
	m.times = append(m.times, d)
	m.mu.Unlock()
}

func (m *timedModel) durations() []time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.times)
}

// fakes are the fake model, the platform's tools and its MCP server, each
// on its own loopback listener of this process.
type fakes struct {
	modelURL    string // OpenAI base URL, ending in /v1
	callbackURL string // …/tools/call; direct calls go to the same origin
	mcpURL      string
	mcpHost     string // host:port, for RUNNEL_MCP_HOST_ALLOWLIST
	model       *timedModel
	platform    *platform
	servers     benchkit.Servers
}

func startFakes(delays []time.Duration) (*fakes, error) {
	script := modelScript(delays)
	if err := script.Validate(); err != nil {
		return nil, fmt.Errorf("fake model script: %w", err)
	}
	f := &fakes{
		model:    &timedModel{h: llmtest.NewServeHandler(script, slog.New(slog.DiscardHandler))},
		platform: newPlatform(),
	}
	modelURL, err := f.servers.Serve(f.model)
	if err != nil {
		return nil, err
	}
	platURL, err := f.servers.Serve(f.platform.handler())
	if err != nil {
		f.close()
		return nil, err
	}
	mcpURL, err := f.servers.Serve(f.platform.mcpHandler())
	if err != nil {
		f.close()
		return nil, err
	}
	f.modelURL, f.callbackURL, f.mcpURL = modelURL+"/v1", platURL+"/tools/call", mcpURL+"/mcp"
	f.mcpHost = mcpURL[len("http://"):]
	return f, nil
}

// close ends slowed model replies, closes the servers and their
// connections, and waits for their goroutines.
func (f *fakes) close() {
	f.model.h.Close()
	f.servers.Close()
	// A session runnel left open would keep its waiter forever.
	for ss := range f.platform.mcpSrv.Sessions() {
		_ = ss.Close()
	}
	f.platform.mcpWait.Wait()
}
