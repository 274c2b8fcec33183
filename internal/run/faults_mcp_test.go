package run

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/runnel/runnel/internal/proctest"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/llmtest"
	rmcp "github.com/runnel/runnel/internal/mcp"
)

// hugeResultBytes is more than runnel reads of one MCP message (4 MiB).
const hugeResultBytes = 6 << 20

// faultMCP is a real MCP server (go-sdk, streamable HTTP on loopback)
// whose tools fail: "hang" never answers, "fail" answers isError, "rpc"
// answers a JSON-RPC error, "huge" answers more than runnel reads, and
// "drop" has its connection closed under the call. It counts its live
// sessions from its own side.
type faultMCP struct {
	url   string
	calls *inflight
	// hangs receives the end of every hang call: the server was told the
	// call is over (cancelled, or its session ended).
	hangs    chan struct{}
	sessions *liveSessions
}

func newFaultMCP(t *testing.T) *faultMCP {
	t.Helper()
	f := &faultMCP{hangs: make(chan struct{}, 4), sessions: newLiveSessions()}
	srv := mcp.NewServer(&mcp.Implementation{Name: "faults", Version: "1"}, f.sessions.serverOptions())
	type none struct{}
	mcp.AddTool(srv, &mcp.Tool{Name: "hang", Description: "Never answers."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
			<-ctx.Done()
			f.hangs <- struct{}{}
			return nil, nil, ctx.Err()
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "fail", Description: "Fails as a tool."},
		func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New("the disk is full")
		})
	srv.AddTool(&mcp.Tool{Name: "rpc", Description: "Fails as a server.", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the database is down"}
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "huge", Description: "Answers too much."},
		func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", hugeResultBytes)}}}, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "drop", Description: "Loses its connection."},
		func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New("unreachable: the connection is closed before the call gets here")
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs, calls := serveTracked(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var call struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &call) == nil && call.Method == "tools/call" && call.Params.Name == "drop" {
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		h.ServeHTTP(w, r)
	}))
	f.url, f.calls = hs.URL+"/mcp", calls
	return f
}

// closed waits until the server has no live session.
func (f *faultMCP) closed(t *testing.T) {
	t.Helper()
	if live := f.sessions.openAfter(faultBound); live > 0 {
		t.Errorf("%d MCP session(s) still open after the run ended", live)
	}
}

// TestMCPFaults: MCP servers that are down, hang, fail, drop the call or
// answer too much. None fails the run: a server that cannot be reached is
// a notice, a call that fails is a result for the model, which goes on.
func TestMCPFaults(t *testing.T) {
	silent, _ := serveTracked(t, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	tests := []struct {
		name string
		// url is the server's URL; "" is a faultMCP's.
		url  func(t *testing.T) string
		call string // the tool the model calls; "" calls none
		opts Options
		// want is what the model read back, or the notice when call is "".
		want string
	}{{
		name: "down: connection refused",
		url:  func(t *testing.T) string { return "http://" + closedAddr(t) + "/mcp" },
		want: `MCP server "m" is unavailable for this run: could not connect to http://127.0.0.1:`,
	}, {
		name: "down: accepts, never answers",
		url:  func(*testing.T) string { return silent.URL + "/mcp" },
		opts: Options{MCPConnectTimeout: 300 * time.Millisecond},
		want: `MCP server "m" is unavailable for this run: ` + silent.URL + ` did not answer within the connect timeout.`,
	}, {
		name: "hang",
		call: "hang",
		opts: Options{MCPCallTimeout: 300 * time.Millisecond},
		want: `The MCP tool call failed: MCP server "m": the call to "hang" got no answer within 300ms; the server was asked to cancel it`,
	}, {
		name: "a failed call",
		call: "fail",
		want: "the disk is full",
	}, {
		name: "an error answer",
		call: "rpc",
		want: `The MCP tool call failed: MCP server "m" answered the call to "rpc" with an error: the database is down (code -32603)`,
	}, {
		name: "disconnect mid-call",
		call: "drop",
		want: `The MCP tool call failed: MCP server "m": call to "drop" failed: the request got no answer (EOF)`,
	}, {
		name: "huge result",
		call: "huge",
		want: `The MCP tool call failed: MCP server "m": the answer to "huge" is larger than 4 MiB, the most runnel reads of one MCP message; ask the tool for less`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			nothingLeft(t, root)
			f := newFaultMCP(t)
			url := f.url
			if tt.url != nil {
				url = tt.url(t)
			}
			res, llm := mcpFaultRun(t, tt.opts, root, tt.call, runnel.McpServer{Name: "m", Connection: &runnel.McpConnection{Type: "http", URL: url}})
			checkMCPFault(t, res, tt.call, tt.want)
			if tt.call == "hang" {
				select {
				case <-f.hangs:
				case <-time.After(faultBound):
					t.Error("the server never learnt that the hung call was over")
				}
			}
			f.closed(t)
			f.calls.settled(t, "the MCP server")
			llm.settled(t, "the model server")
		})
	}
}

// mcpFaultRun runs a turn whose model calls mcp__m__<call> (or just
// answers when call is "") with server as its only MCP server.
func mcpFaultRun(t *testing.T, opts Options, root, call string, server runnel.McpServer) (*runnel.Result, *modelServer) {
	t.Helper()
	script := llmtest.Script{Rules: []llmtest.Rule{{Reply: llmtest.Reply{Text: "Hello without tools."}}}}
	if call != "" {
		script = pauseScript(toolCall("c1", "mcp__m__"+call, `{}`))
	}
	llm := newModelServer(t, script)
	req := llm.request(APIOpenAIChat, "Use the server")
	req.McpServers = []runnel.McpServer{server}
	req.Permissions = json.RawMessage(`{"default":"allow"}`)
	if server.Connection.Type == rmcp.TransportStdio {
		req.Sandbox = "isolated"
		req.SandboxPermission = &runnel.SandboxPermission{Network: &runnel.NetworkPolicy{Mode: "off"}}
	}
	opts.WorkspaceRoot = root
	opts.MCPGuard = rmcp.GuardOptions{HostAllowlist: []string{"127.0.0.1"}}
	res, _ := runWithin(t, overHTTP(t, NewManager(&opts)), req)
	return res, llm
}

// checkMCPFault checks that the run completed, the model having read want
// as the call's error result, or, without a call, with want as a notice.
func checkMCPFault(t *testing.T, res *runnel.Result, call, want string) {
	t.Helper()
	if !res.OK || res.Status != runnel.StatusCompleted {
		t.Fatalf("result: ok %v status %q error %q; want the run to complete", res.OK, res.Status, res.Error)
	}
	if call == "" {
		if len(res.Notices) != 1 || !strings.HasPrefix(res.Notices[0], want) {
			t.Errorf("notices %q, want one starting %q", res.Notices, want)
		}
		return
	}
	got := resultOf(t, res, "c1")
	if !got.IsError || !strings.HasPrefix(got.OutputText(), want) || res.Output != "Last result: "+got.OutputText() {
		t.Errorf("the model read %q (error %v), then said %q; want an error result starting %q", got.OutputText(), got.IsError, res.Output, want)
	}
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	s := httptest.NewServer(http.NotFoundHandler())
	addr := s.Listener.Addr().String()
	s.Close()
	return addr
}

// stdioFixtureCommand makes this test binary a stdio MCP server
// (TestMain): serveStdioFixture.
const stdioFixtureCommand = "mcp-stdio-fixture"

// serveStdioFixture serves MCP on standard input and output with the
// tools of a failing stdio server: "exit" dies mid-call; "hang" never
// answers, and once it has been called the program neither exits when
// its input closes nor on SIGTERM, so runnel has to kill it; "huge"
// answers one line larger than runnel reads. Its other arguments are only
// there to be seen in its command line.
func serveStdioFixture() int {
	srv := mcp.NewServer(&mcp.Implementation{Name: "stdio-faults", Version: "1"}, nil)
	type none struct{}
	var stubborn atomic.Bool
	mcp.AddTool(srv, &mcp.Tool{Name: "exit", Description: "Dies mid-call."},
		func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, "the fixture crashes on purpose")
			os.Exit(3)
			return nil, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "hang", Description: "Never answers."},
		func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			stubborn.Store(true)
			signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
			sleepForever()
			return nil, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "huge", Description: "Answers too much."},
		func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", hugeResultBytes)}}}, nil, nil
		})
	err := srv.Run(context.Background(), &mcp.StdioTransport{})
	if stubborn.Load() {
		sleepForever()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// sleepForever blocks for good; unlike select {}, which the runtime ends
// as a deadlock once nothing else can run.
func sleepForever() {
	for {
		time.Sleep(time.Hour)
	}
}

// stdioFixture is this test binary where the isolated sandbox can run it:
// not under /tmp, which the sandbox replaces with its own.
func stdioFixture(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("/var/tmp", "runnel-faults-")
	if err != nil {
		t.Skipf("no directory outside /tmp for the stdio server: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "stdio-server")
	if os.Link(exe, bin) != nil {
		data, err := os.ReadFile(exe)
		if err == nil {
			err = os.WriteFile(bin, data, 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

// TestMCPStdioFaults: a stdio server, a program runnel starts in the
// run's isolated sandbox, that dies mid-call, hangs and refuses to exit,
// or writes a line too long. The model reads what happened, the run
// completes, and the program is gone when the run has ended.
func TestMCPStdioFaults(t *testing.T) {
	iso := isolator(t)
	bin := stdioFixture(t)
	tests := []struct {
		call    string
		timeout time.Duration
		want    string
	}{
		{"exit", faultBound / 2, `The MCP tool call failed: MCP server "m": call to "exit" failed: its program stopped before answering the call; it wrote: the fixture crashes on purpose`},
		{"hang", 300 * time.Millisecond, `The MCP tool call failed: MCP server "m": the call to "hang" got no answer within 300ms; the server was asked to cancel it`},
		{"huge", faultBound / 2, `The MCP tool call failed: MCP server "m": call to "huge" failed: a message it sent is larger than 4 MiB`},
	}
	for _, tt := range tests {
		t.Run(tt.call, func(t *testing.T) {
			root := t.TempDir()
			nothingLeft(t, root)
			marker := fmt.Sprintf("stdio-fault-%s-%d", tt.call, time.Now().UnixNano())
			res, llm := mcpFaultRun(t, Options{Isolator: iso, MCPCallTimeout: tt.timeout}, root, tt.call,
				runnel.McpServer{Name: "m", Connection: &runnel.McpConnection{Type: "stdio", Command: bin, Args: []string{stdioFixtureCommand, marker}}})
			checkMCPFault(t, res, tt.call, tt.want)
			// The run ended its program before it returned; the wait only
			// turns a survivor into a failure.
			deadline := time.Now().Add(faultBound)
			for left := proctest.Naming(marker); len(left) > 0; left = proctest.Naming(marker) {
				if time.Now().After(deadline) {
					t.Errorf("the stdio server outlived its run: %v", left)
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			llm.settled(t, "the model server")
		})
	}
}
