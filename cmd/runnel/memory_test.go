package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/llmtest"
)

// maxPeakRSS is the peak resident memory `runnel serve` may reach under
// the worst inputs of the security review, all at once. Each of them
// alone took it past a gigabyte before the caps; with them, two of each
// and ten ordinary runs stay well below this.
const maxPeakRSS = 256 << 20

// TestWorstInputsKeepMemoryBounded runs the real binary against a model
// that never stops talking, an MCP server whose tool answers 64 MB, and
// an edit that would grow a 9 MB file a thousandfold, two of each, beside
// ordinary runs. Each attack ends its own run with a clear answer, the
// ordinary runs complete, and the process's peak RSS stays under
// maxPeakRSS.
func TestWorstInputsKeepMemoryBounded(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/<pid>/status")
	}
	bin := buildShared(t)
	llm := llmtest.NewServer(attackScript())
	defer llm.Close()
	big := hugeMCPServer(t, 64<<20)
	env := []string{"PATH=/usr/bin:/bin", "RUNNEL_PORT=0", "RUNNEL_TOKEN=replica-token-0123456789",
		"RUNNEL_MCP_HOST_ALLOWLIST=127.0.0.1", "RUNNEL_RUN_TIMEOUT=2m", "RUNNEL_WORKSPACE_ROOT=" + ownedDir(t, nil)}
	url, cmd, stop := startProcessAs(t, bin, env, nil)
	defer stop()

	request := func(prompt string) map[string]any {
		return map[string]any{
			"model":       "openai/gpt-test",
			"endpoint":    map[string]string{"baseUrl": llm.URL + "/v1"},
			"tools":       []string{"bash", "edit"},
			"permissions": map[string]string{"default": "allow"},
			"mcpServers":  []map[string]any{{"name": "big", "connection": map[string]string{"type": "http", "url": big}}},
			"messages":    []runnel.Message{runnel.UserText(prompt)},
		}
	}
	type run struct {
		prompt string
		check  func(*runnel.Result) string // "" when the result is right
	}
	runs := []run{
		{"talk forever", func(r *runnel.Result) string {
			return want(r.Status == runnel.StatusFailed && r.ErrorCode == runnel.CodeProviderError && strings.Contains(r.Error, "went past 8 MiB"),
				"the endless answer stopped at the step cap")
		}},
		{"dump everything", func(r *runnel.Result) string {
			return want(r.Status == runnel.StatusCompleted && strings.Contains(r.Output, "larger than 4 MiB"),
				"the huge MCP answer refused to the model")
		}},
		{"edit bomb", func(r *runnel.Result) string {
			return want(r.Status == runnel.StatusCompleted && strings.Contains(r.Output, "more than edit handles"),
				"the edit refused as too large")
		}},
	}
	runs = append(runs, runs...)
	for range 10 {
		runs = append(runs, run{"hello", func(r *runnel.Result) string {
			return want(r.Status == runnel.StatusCompleted && r.Output == "Hi.", "an ordinary run completed")
		}})
	}
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Go(func() {
			res := postRunCtx(t, url, request(r.prompt))
			if problem := r.check(res); problem != "" {
				t.Errorf("%s: %s; got status %q output %q error %q", r.prompt, problem, res.Status, clip(res.Output), res.Error)
			}
		})
	}
	wg.Wait()
	peak := peakRSS(t, cmd.Process.Pid)
	t.Logf("peak RSS of runnel serve: %d MiB", peak>>20)
	if peak > maxPeakRSS {
		t.Errorf("peak RSS %d MiB, want at most %d MiB", peak>>20, maxPeakRSS>>20)
	}
}

// clip keeps a failure message readable when an output is megabytes.
func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

func want(ok bool, what string) string {
	if ok {
		return ""
	}
	return "want " + what
}

// attackScript is a model that misbehaves on request.
func attackScript() llmtest.Script {
	one, two := 1, 2
	makeBig := `{"command":"head -c 9000000 /dev/zero | tr '\\0' a > big.txt"}`
	bomb := `{"path":"big.txt","old_string":"a","new_string":"` + strings.Repeat("b", 1000) + `","replace_all":true}`
	return llmtest.Script{Rules: []llmtest.Rule{
		{Name: "endless", When: llmtest.Match{LastUserContains: "talk forever"},
			Reply: llmtest.Reply{Text: strings.Repeat("All work and no play. ", 40)},
			Fault: &llmtest.Fault{Kind: llmtest.FaultEndless, AfterChunks: 1}},
		{Name: "dump", When: llmtest.Match{LastUserContains: "dump", ToolResultsBelow: &one},
			Reply: llmtest.Reply{ToolCalls: []llmtest.ToolCall{{ID: "call_dump", Name: "mcp__big__dump", Arguments: json.RawMessage(`{}`)}}}},
		{Name: "make a big file", When: llmtest.Match{LastUserContains: "bomb", ToolResultsBelow: &one},
			Reply: llmtest.Reply{ToolCalls: []llmtest.ToolCall{{ID: "call_mk", Name: "bash", Arguments: json.RawMessage(makeBig)}}}},
		{Name: "the bomb", When: llmtest.Match{LastUserContains: "bomb", ToolResultsAtLeast: &one, ToolResultsBelow: &two},
			Reply: llmtest.Reply{ToolCalls: []llmtest.ToolCall{{ID: "call_bomb", Name: "edit", Arguments: json.RawMessage(bomb)}}}},
		{Name: "report", When: llmtest.Match{LastRole: "tool"}, Reply: llmtest.Reply{Text: "Saw: {{last_tool_result}}"}},
		{Name: "hello", Reply: llmtest.Reply{Text: "Hi."}},
	}}
}

// hugeMCPServer is a real MCP server (go-sdk, streamable HTTP on
// loopback) whose one tool answers size bytes of text.
func hugeMCPServer(t *testing.T, size int) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "big", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "dump", Description: "Dumps everything."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("z", size)}}}, nil, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	return hs.URL + "/mcp"
}

// postRunCtx is postRun from a goroutine: failures are reported, not
// fatal, and a failed request yields an empty result.
func postRunCtx(t *testing.T, url string, req any) *runnel.Result {
	body, _ := json.Marshal(req)
	r, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/run", strings.NewReader(string(body)))
	r.Header.Set("Authorization", "Bearer replica-token-0123456789")
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(r)
	if err != nil {
		t.Error(err)
		return &runnel.Result{}
	}
	defer resp.Body.Close()
	var res runnel.Result
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		t.Errorf("status %d, a body that is not a result: %v", resp.StatusCode, err)
	}
	return &res
}

// peakRSS is VmHWM, the process's peak resident set, in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/<pid>/status")
	return 0
}
