package main

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/runnel/runnel/bench/internal/benchkit"
	"github.com/runnel/runnel/internal/llmtest"
)

// The tools of the benchmark conversation. lookup runs at once (the load's
// tool loop); deleteItem needs a person's approval, so a run calling it
// pauses.
const (
	lookupTool   = "lookup"
	deleteTool   = "delete_item"
	lookupOutput = "3 replicas behind one balancer"
	// apiKey is the model key every run sends: as long as a real one, so
	// runnel's redaction of secrets does real work.
	apiKey = "sk-bench-0123456789abcdef0123456789abcdef"
)

// modelScript scripts the fake model by conversation content: a tool result
// last is answered with text that quotes it, streamed in pieces; a prompt
// asking to delete something calls delete_item; anything else calls lookup.
// Every piece of every reply is delay apart, so a load run (tool call, tool,
// answer in 14 pieces) lasts about 24 delays (config.runLength).
func modelScript(delay time.Duration) llmtest.Script {
	ms := int(delay / time.Millisecond)
	// 12 pieces of 24 bytes after the quoted result's two.
	filler := strings.Repeat("the answer streams on. ", 12)
	return llmtest.Script{Rules: []llmtest.Rule{
		{
			Name:  "answer",
			When:  llmtest.Match{LastRole: llmtest.RoleTool},
			Reply: llmtest.Reply{Text: "Done: {{last_tool_result}}. " + filler, ChunkSize: 24, TokenDelayMs: ms},
		},
		{
			Name: "ask-to-delete",
			When: llmtest.Match{LastUserContains: "delete"},
			Reply: llmtest.Reply{TokenDelayMs: ms, ToolCalls: []llmtest.ToolCall{
				{Name: deleteTool, Arguments: json.RawMessage(`{"item":"report.docx"}`)}}},
		},
		{
			Name: "lookup",
			Reply: llmtest.Reply{TokenDelayMs: ms, ToolCalls: []llmtest.ToolCall{
				{Name: lookupTool, Arguments: json.RawMessage(`{"query":"scale-out"}`)}}},
		},
	}}
}

// fakes are the fake model and the platform's tool endpoint, served from
// this process on loopback. The model records nothing (llmtest's serve
// handler), so its memory does not grow with the thousands of runs.
type fakes struct {
	modelURL    string // OpenAI base URL, ending in /v1
	callbackURL string
	tools       *toolCounter
	servers     benchkit.Servers
	model       *llmtest.Handler
}

func startFakes(delay time.Duration) (*fakes, error) {
	f := &fakes{tools: &toolCounter{calls: map[string]int{}, total: map[string]int{}}}
	f.model = llmtest.NewServeHandler(modelScript(delay), slog.New(slog.DiscardHandler))
	modelURL, err := f.servers.Serve(f.model)
	if err != nil {
		return nil, err
	}
	cbURL, err := f.servers.Serve(f.tools)
	if err != nil {
		f.close()
		return nil, err
	}
	f.modelURL, f.callbackURL = modelURL+"/v1", cbURL+"/tools/call"
	return f, nil
}

// close ends slowed model replies, then the servers and their connections.
func (f *fakes) close() {
	f.model.Close()
	f.servers.Close()
}

// toolCounter is the platform's tool endpoint: it decodes runnel's
// callback envelope (DESIGN §4.2), counts the executions of each tool call
// by its id, and answers. Safe for concurrent use.
type toolCounter struct {
	mu    sync.Mutex
	calls map[string]int // "name#id" → executions
	total map[string]int // name → executions
}

func (t *toolCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, name, err := benchkit.ReadToolCall(r)
	if err != nil {
		http.Error(w, "bad envelope", http.StatusBadRequest)
		return
	}
	var out string
	switch name {
	case lookupTool:
		out = lookupOutput
	case deleteTool:
		out = "deleted report.docx for call " + id
	default:
		http.Error(w, "unknown tool "+name, http.StatusBadRequest)
		return
	}
	t.mu.Lock()
	t.calls[name+"#"+id]++
	t.total[name]++
	t.mu.Unlock()
	benchkit.WriteToolResult(w, id, out)
}

// executions is how often the call of tool name with this id ran.
func (t *toolCounter) executions(name, id string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.calls[name+"#"+id]
}

// executed is how often tool name ran, all calls together.
func (t *toolCounter) executed(name string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total[name]
}
