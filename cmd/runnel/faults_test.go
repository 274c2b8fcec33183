package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/runnel/runnel/internal/proctest"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/llmtest"
	"github.com/runnel/runnel/internal/server"
	"github.com/runnel/runnel/internal/testlog"
)

// The fault matrix's client and process rows (issue 14): a client that
// disconnects mid-stream or stops reading, and SIGTERM mid-run, each
// against runnel serve with the real run manager, a real model server, a
// real MCP server, and the runs' processes in their sandbox. Each ends
// within faultBound and leaves nothing running: no process of the run, no
// MCP session, no workspace, no request to the model or the tools, and,
// in-process, no goroutine or file descriptor. The provider, callback and
// MCP rows are in internal/run/faults_test.go.

// faultBound bounds every wait of these tests; it only turns a hang into
// a failure.
const faultBound = 30 * time.Second

// noticeBound bounds the wait for a run to notice that its client hung
// up. It is under server.DefaultKeepAlive on purpose: the next keep-alive
// would fail to be written and end the run anyway, which would hide a
// server that does not notice a disconnect by itself.
const noticeBound = server.DefaultKeepAlive * 2 / 3

// eventually polls cond until it holds, failing the test after
// faultBound.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	within(t, faultBound, what, cond)
}

// within polls cond until it holds, failing the test after bound.
func within(t *testing.T, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(bound); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

// sleepMarker is an argument for sleep that no other process has: the run's
// bash command, and whatever is left of it, can be found by it.
func sleepMarker() string { return fmt.Sprintf("3599.%09d", time.Now().Nanosecond()) }

// faultWorld is what a run talks to: the scripted model, counting the
// bytes it streams and the requests it is still answering, and an MCP
// server with one tool that runs until cancelled, counting its sessions.
type faultWorld struct {
	llm      string
	modelOut atomic.Int64
	modelNow atomic.Int32

	mcp           string
	waitStarted   chan struct{}
	waitCancelled chan struct{}
	sessions      atomic.Int32
}

// newFaultWorld starts the world with the model's script.
func newFaultWorld(t *testing.T, script llmtest.Script) *faultWorld {
	t.Helper()
	w := &faultWorld{waitStarted: make(chan struct{}, 4), waitCancelled: make(chan struct{}, 4)}
	h := llmtest.NewHandler(script)
	llm := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.modelNow.Add(1)
		defer w.modelNow.Add(-1)
		h.ServeHTTP(&countingWriter{ResponseWriter: rw, n: &w.modelOut}, r)
	}))
	t.Cleanup(llm.Close)
	t.Cleanup(h.Close) // runs first: releases the handler's hangs
	w.llm = llm.URL + "/v1"

	srv := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1"}, &mcp.ServerOptions{
		InitializedHandler: func(_ context.Context, req *mcp.InitializedRequest) {
			w.sessions.Add(1)
			go func() { _ = req.Session.Wait(); w.sessions.Add(-1) }()
		},
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "wait", Description: "Runs until cancelled.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			w.waitStarted <- struct{}{}
			<-ctx.Done()
			w.waitCancelled <- struct{}{}
			return nil, nil, ctx.Err()
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	w.mcp = hs.URL + "/mcp"
	return w
}

// countingWriter counts the bytes a handler writes.
type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n.Add(int64(n))
	return n, err
}

func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// request is a run of the model's prompt with bash and the MCP server.
func (w *faultWorld) request(prompt string) map[string]any {
	return map[string]any{
		"model":       "openai/gpt-test",
		"endpoint":    map[string]string{"baseUrl": w.llm},
		"tools":       []string{"bash"},
		"permissions": map[string]string{"default": "allow"},
		"mcpServers":  []map[string]any{{"name": "slow", "connection": map[string]string{"type": "http", "url": w.mcp}}},
		"messages":    []runnel.Message{runnel.UserText(prompt)},
	}
}

// stuckScript makes the model run, at once, a bash command that sleeps for
// an hour and the MCP tool that waits for ever; nothing else ends them.
func stuckScript(marker string) llmtest.Rule {
	return llmtest.Rule{Name: "stuck", When: llmtest.Match{LastUserContains: "get stuck"}, Reply: llmtest.Reply{ToolCalls: []llmtest.ToolCall{
		{ID: "call_sleep", Name: "bash", Arguments: json.RawMessage(`{"command":"sleep ` + marker + `"}`)},
		{ID: "call_wait", Name: "mcp__slow__wait", Arguments: json.RawMessage(`{}`)},
	}}}
}

// stuck waits until the run's tools are running: the MCP call on the
// server, the sleep in the run's sandbox.
func (w *faultWorld) stuck(t *testing.T, marker string) {
	t.Helper()
	select {
	case <-w.waitStarted:
	case <-time.After(faultBound):
		t.Fatal("the MCP tool never started")
	}
	// The sleep itself, not only the sandbox around it: it runs once the
	// sandbox has been handed its cgroups.
	eventually(t, "the bash command to start", func() bool {
		return slices.ContainsFunc(proctest.Naming(marker), func(p string) bool {
			_, cmdline, _ := strings.Cut(p, " ")
			return strings.HasPrefix(cmdline, "sleep ")
		})
	})
}

// unstuck waits, up to bound, until everything the run started is over:
// the MCP call cancelled on the server and every session closed, no
// process left of the bash command, no request still open to the model.
func (w *faultWorld) unstuck(t *testing.T, marker string, bound time.Duration) {
	t.Helper()
	select {
	case <-w.waitCancelled:
	case <-time.After(bound):
		t.Errorf("the MCP call was not cancelled on the server within %s", bound)
	}
	within(t, bound, "the MCP sessions to close", func() bool { return w.sessions.Load() == 0 })
	within(t, bound, "the bash command's processes to be gone", func() bool { return len(proctest.Naming(marker)) == 0 })
	within(t, bound, "the model server's requests to end", func() bool { return w.modelNow.Load() == 0 })
}

// emptyDir waits until the workspace root holds nothing: a run logs its
// end just before it removes its workspace.
func emptyDir(t *testing.T, dir string) {
	t.Helper()
	eventually(t, "the workspaces under "+dir+" to be removed", func() bool {
		left, _ := os.ReadDir(dir)
		return len(left) == 0
	})
}

// inProcessLeaks snapshots this process and, once the test's later
// cleanups have run (the daemon stopped, the servers closed), checks that
// no goroutine started since is left and no more file descriptors are
// open than before.
func inProcessLeaks(t *testing.T) {
	t.Helper()
	goroutines := goleak.IgnoreCurrent()
	before := countFDs(t)
	t.Cleanup(func() {
		goleak.VerifyNone(t, goroutines)
		var now int
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if now = countFDs(t); now <= before || time.Now().After(deadline) {
				break
			}
		}
		if now > before {
			t.Errorf("%d file descriptors open after the daemon stopped, %d before", now, before)
		}
	})
}

// noNewChildren checks that the process pid has no child, not even a
// zombie (a process runnel started and never waited for), but those of
// before.
func noNewChildren(t *testing.T, pid int, before []string) {
	t.Helper()
	pidOf := func(c string) string { p, _, _ := strings.Cut(c, " "); return p }
	var left []string
	for _, c := range children(pid) {
		// By pid: one that was running then may be a zombie now.
		if !slices.ContainsFunc(before, func(b string) bool { return pidOf(b) == pidOf(c) }) {
			left = append(left, c)
		}
	}
	if len(left) > 0 {
		t.Errorf("child processes left: %q", left)
	}
}

// children are the child processes of pid, with their names and states.
func children(pid int) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		status, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil || !strings.Contains(string(status), "\nPPid:\t"+strconv.Itoa(pid)+"\n") {
			continue
		}
		name, state := "", ""
		for line := range strings.SplitSeq(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "Name:\t"); ok {
				name = v
			}
			if v, ok := strings.CutPrefix(line, "State:\t"); ok {
				state = v
			}
		}
		out = append(out, e.Name()+" "+name+" "+state)
	}
	return out
}

func countFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count file descriptors: %v", err)
	}
	return len(entries)
}

// runLogs are the daemon's "run end" log lines so far.
func runLogs(logs *testlog.Buffer) []map[string]any {
	var out []map[string]any
	for line := range strings.SplitSeq(logs.String(), "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) == nil && l["msg"] == "run end" {
			out = append(out, l)
		}
	}
	return out
}

// chatBody is a /v1/chat body carrying the run's fields.
func chatBody(req map[string]any, prompt string) map[string]any {
	body := map[string]any{"id": "chat-1", "messages": []map[string]any{{"id": "m1", "role": "user",
		"parts": []map[string]string{{"type": "text", "text": prompt}}}}}
	for k, v := range req {
		if k != "messages" {
			body[k] = v
		}
	}
	return body
}

// route is a front door a client can fail on.
type route struct {
	name, path, accept string
	body               func(req map[string]any, prompt string) map[string]any
}

func runBody(req map[string]any, _ string) map[string]any { return req }

// streamingRoutes are the front doors that stream a run.
var streamingRoutes = []route{
	{"run NDJSON", "/run", "application/x-ndjson", runBody},
	{"chat UI stream", "/v1/chat", "text/event-stream", chatBody},
}

// TestClientDisconnectsMidStream: the client hangs up while the run's
// tools are running, on each front door (a one-shot answer too). The run
// is cancelled: the MCP call is cancelled on its server and the session
// closed, the bash command's processes are gone, the workspace is
// removed, and the run's log says cancelled.
func TestClientDisconnectsMidStream(t *testing.T) {
	for _, route := range append(streamingRoutes, route{"run one-shot JSON", "/run", "application/json", runBody}) {
		t.Run(route.name, func(t *testing.T) {
			inProcessLeaks(t)
			marker := sleepMarker()
			w := newFaultWorld(t, llmtest.Script{Rules: []llmtest.Rule{stuckScript(marker)}})
			root := t.TempDir()
			url, logs, stop := startDaemon(t, map[string]string{"RUNNEL_WORKSPACE_ROOT": root, "RUNNEL_MCP_HOST_ALLOWLIST": "127.0.0.1"}, nil)
			// Once this process has been a child subreaper (an earlier
			// daemon made it one), what the daemon's start-up left is
			// its own.
			kids := children(os.Getpid())

			body, _ := json.Marshal(route.body(w.request("get stuck"), "get stuck"))
			ctx, disconnect := context.WithCancel(context.Background())
			defer disconnect()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+route.path, strings.NewReader(string(body)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", route.accept)
			client := &http.Client{Transport: &http.Transport{}}
			defer client.CloseIdleConnections()
			read := make(chan error, 1)
			go func() {
				resp, err := client.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				read <- err
			}()
			w.stuck(t, marker)
			disconnect()
			select {
			case <-read:
			case <-time.After(faultBound):
				t.Fatal("the client's read did not end after it disconnected")
			}
			w.unstuck(t, marker, noticeBound)
			eventually(t, "the run to end", func() bool { return len(runLogs(logs)) > 0 })
			if l := runLogs(logs)[0]; l["status"] != string(runnel.StatusCancelled) {
				t.Errorf("the run ended %v, want cancelled", l["status"])
			}
			emptyDir(t, root)
			if code := stop(); code != exitOK {
				t.Errorf("serve exited %d", code)
			}
			noNewChildren(t, os.Getpid(), kids)
		})
	}
}

// TestClientStopsReading: the client sends its request and reads nothing
// while the model talks for ever. runnel does not buffer the stream for
// it: once a write has blocked for the write timeout the client is gone,
// the run is cancelled and the model's stream abandoned, long before the
// run's own deadline or its byte caps could end it.
func TestClientStopsReading(t *testing.T) {
	for _, route := range streamingRoutes {
		t.Run(route.name, func(t *testing.T) {
			inProcessLeaks(t)
			w := newFaultWorld(t, llmtest.Script{Rules: []llmtest.Rule{{
				Reply: llmtest.Reply{Text: strings.Repeat("All work and no play. ", 40), ChunkSize: 8},
				Fault: &llmtest.Fault{Kind: llmtest.FaultEndless, AfterChunks: 8}}}})
			root := t.TempDir()
			url, logs, stop := startDaemon(t, map[string]string{"RUNNEL_WORKSPACE_ROOT": root, "RUNNEL_MCP_HOST_ALLOWLIST": "127.0.0.1",
				"RUNNEL_WRITE_TIMEOUT": "500ms", "RUNNEL_RUN_TIMEOUT": "10m", "RUNNEL_MAX_STEP_BYTES": "1GiB", "RUNNEL_MAX_RUN_BYTES": "1GiB"}, nil)
			kids := children(os.Getpid())

			body, _ := json.Marshal(route.body(w.request("talk"), "talk"))
			conn := silentClient(t, strings.TrimPrefix(url, "http://"))
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
				route.path, route.accept, len(body), body)

			eventually(t, "the run to end", func() bool { return len(runLogs(logs)) > 0 })
			if l := runLogs(logs)[0]; l["status"] != string(runnel.StatusCancelled) {
				t.Errorf("the run ended %v (%v), want cancelled", l["status"], l)
			}
			eventually(t, "the model server's requests to end", func() bool { return w.modelNow.Load() == 0 })
			// What a stalled client costs is what the sockets hold, not
			// what the model can stream.
			if n := w.modelOut.Load(); n > 64<<20 {
				t.Errorf("the model streamed %d MiB to a run whose client read nothing", n>>20)
			}
			emptyDir(t, root)
			conn.Close()
			if code := stop(); code != exitOK {
				t.Errorf("serve exited %d", code)
			}
			noNewChildren(t, os.Getpid(), kids)
		})
	}
}

// silentClient connects with a tiny receive buffer, for a client that
// then reads nothing.
func silentClient(t *testing.T, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestSIGTERMMidRun sends SIGTERM to a real `runnel serve` with two runs
// in flight: one that can finish within the grace period does, the other
// (stuck in its tools) is cancelled when the grace is over and says so in
// its stream. Then the process exits 0, with nothing of its runs left:
// no process, no MCP session, no workspace.
func TestSIGTERMMidRun(t *testing.T) {
	bin := buildShared(t)
	marker := sleepMarker()
	w := newFaultWorld(t, llmtest.Script{Rules: []llmtest.Rule{
		stuckScript(marker),
		{Name: "report", When: llmtest.Match{LastRole: llmtest.RoleTool}, Reply: llmtest.Reply{Text: "Finished: {{last_tool_result}}"}},
		{Name: "finish", When: llmtest.Match{LastUserContains: "finish"}, Reply: llmtest.Reply{ToolCalls: []llmtest.ToolCall{
			{ID: "call_fin", Name: "finish", Arguments: json.RawMessage(`{}`)}}}},
	}})
	// The platform answers the finishing run's tool once the drain has
	// begun, so that run is in flight when SIGTERM comes.
	called, release := make(chan struct{}, 1), make(chan struct{})
	platform := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		called <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(rw, `{"call":{"id":"x","status":{"code":"STATUS_CODE_OK"},"data":{"role":"tool","content":"the report is filed"}}}`)
	}))
	defer platform.Close()
	root := ownedDir(t, nil)
	logs := &testlog.Buffer{}
	cmd := exec.Command(bin, "serve")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "RUNNEL_PORT=0", "RUNNEL_SHUTDOWN_GRACE=5s", "RUNNEL_SHUTDOWN_DELAY=2s",
		"RUNNEL_WORKSPACE_ROOT=" + root, "RUNNEL_MCP_HOST_ALLOWLIST=127.0.0.1"}
	url := startLogged(t, cmd, logs)
	// Nothing of its start-up is left either (its isolated sandbox's
	// trial once left a zombie).
	noNewChildren(t, cmd.Process.Pid, nil)

	finishing := w.request("finish the report")
	finishing["customTools"] = []map[string]any{{"name": "finish", "inputSchema": map[string]any{"type": "object"}}}
	finishing["toolCallback"] = map[string]string{"endpoint": platform.URL + "/tools/call"}
	finished, cancelled := streamRun(t, url, finishing), streamRun(t, url, w.request("get stuck"))
	select {
	case <-called:
	case <-time.After(faultBound):
		t.Fatal("the finishing run never called its tool")
	}
	w.stuck(t, marker)

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// For the shutdown delay it still serves, telling balancers to take
	// it out.
	eventually(t, "the delay to begin", func() bool { return strings.Contains(logs.String(), "draining: still accepting") })
	if res, err := http.Get(url + "/health"); err != nil {
		t.Errorf("/health during the shutdown delay: %v", err)
	} else {
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"status":"draining"`) {
			t.Errorf("/health during the shutdown delay: %d %s, want 503 draining", res.StatusCode, body)
		}
	}
	eventually(t, "the drain to begin", func() bool { return strings.Contains(logs.String(), "draining: accepting no new requests") })
	close(release)

	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("serve exited with %v after SIGTERM, want 0", err)
		}
	case <-time.After(faultBound):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatalf("serve did not exit within %s of SIGTERM", faultBound)
	}

	if s := <-finished; s.result == nil || s.result.Status != runnel.StatusCompleted || s.result.Output != "Finished: the report is filed" {
		t.Errorf("the run that could finish: %+v (read error %v), want it completed within the grace", s.result, s.err)
	}
	s := <-cancelled
	want := []string{"error cancelled: The run was cancelled before it finished.", "done cancelled"}
	if s.result == nil || s.result.Status != runnel.StatusCancelled || len(s.ends) < 2 || strings.Join(s.ends[len(s.ends)-2:], "|") != strings.Join(want, "|") {
		t.Errorf("the stuck run ended %q with %+v (read error %v), want %q and a cancelled result", s.ends, s.result, s.err, want)
	}
	if !strings.Contains(logs.String(), "grace period over: cancelling in-flight runs") {
		t.Error("the log does not say the grace period ended the stuck run")
	}
	w.unstuck(t, marker, faultBound)
	emptyDir(t, root)
}

// startLogged starts cmd, a `runnel serve`, copying its log to logs, and
// returns its URL once it listens. The test kills it if it is still
// running at the end.
func startLogged(t *testing.T, cmd *exec.Cmd, logs *testlog.Buffer) string {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			fmt.Fprintln(logs, sc.Text())
			var line struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "runnel listening" {
				addr <- line.Addr
			}
		}
	}()
	select {
	case a := <-addr:
		return "http://" + a
	case <-time.After(faultBound):
		t.Fatalf("serve never said it was listening:\n%s", logs)
		return ""
	}
}

// streamed is what a client read of an NDJSON run: the types of the
// stream's last events (error ones with their code and message), and the
// result record.
type streamed struct {
	ends   []string
	result *runnel.Result
	err    error
}

// streamRun posts req for NDJSON and reads the stream to its end in the
// background.
func streamRun(t *testing.T, url string, req map[string]any) <-chan streamed {
	t.Helper()
	body, _ := json.Marshal(req)
	out := make(chan streamed, 1)
	go func() {
		var s streamed
		defer func() { out <- s }()
		r, _ := http.NewRequest(http.MethodPost, url+"/run", strings.NewReader(string(body)))
		r.Header.Set("Accept", "application/x-ndjson")
		client := &http.Client{Transport: &http.Transport{}, Timeout: 2 * faultBound}
		defer client.CloseIdleConnections()
		resp, err := client.Do(r)
		if err != nil {
			s.err = err
			return
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var rec server.Record
			if json.Unmarshal(sc.Bytes(), &rec) != nil {
				continue
			}
			switch {
			case rec.Event != nil && rec.Event.Type == runnel.EventError:
				s.ends = append(s.ends, fmt.Sprintf("error %s: %s", rec.Event.Code, rec.Event.Message))
			case rec.Event != nil && rec.Event.Type == runnel.EventDone:
				s.ends = append(s.ends, "done "+rec.Event.StopReason)
			case rec.Event != nil:
				s.ends = append(s.ends, string(rec.Event.Type))
			case rec.Result != nil:
				s.result = rec.Result
			}
		}
		s.err = sc.Err()
	}()
	return out
}
