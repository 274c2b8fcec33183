package agenttest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/runnel/runnel/internal/proctest"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/agents"
	"github.com/runnel/runnel/internal/llmtest"
	"github.com/runnel/runnel/internal/server"
)

const (
	token  = "agenttest-token-0123456789"
	secret = "agenttest-interaction-secret-0123456789"
	// modelKey is the provider key every request carries; no result, event
	// or log line may show it.
	modelKey = "sk-agenttest-model-key-0123"
)

// agentsDir is where the agents are installed; the test is skipped when
// none is configured, and fails when the agent it needs is missing.
func agentsDir(t *testing.T, names ...string) string {
	t.Helper()
	dir := os.Getenv(envAgentsDir)
	if dir == "" {
		t.Skipf("%s is not set: install the agents with `runnel agents install claude codex pi` and point it at their directory (.ci/run does)", envAgentsDir)
	}
	reg := agents.NewRegistry(agents.Options{Dir: dir})
	for _, n := range names {
		if _, err := reg.Resolve(n); err != nil {
			t.Fatalf("%s is set, but agent %s cannot run: %v", envAgentsDir, n, err)
		}
	}
	return dir
}

// script is the scripted model every agent talks to, deciding from the
// request's content alone (agents make side calls: titles, routing). Tool
// names are "server/tool" references, which the model server resolves to
// each agent's own spelling.
func script() llmtest.Script {
	return llmtest.Script{Rules: []llmtest.Rule{
		{Name: "claude-title", When: llmtest.Match{SystemContains: "naming a coding session"}, Reply: llmtest.Reply{Text: `{"title":"A test"}`}},
		{Name: "codex-title", When: llmtest.Match{LastUserContains: "generate a very short title"}, Reply: llmtest.Reply{Text: `{"title":"A test"}`}},
		{Name: "after-tool", When: llmtest.Match{LastRole: llmtest.RoleTool}, Reply: llmtest.Reply{Text: "Tool said: {{last_tool_result}}"}},
		{Name: "denied", When: llmtest.Match{LastUserContains: "[user DENIED"}, Reply: llmtest.Reply{Text: "Understood, I will not do it."}},
		{Name: "picked", When: llmtest.Match{LastUserContains: "pick_date returned:"}, Reply: llmtest.Reply{Text: "You picked a date."}},
		{Name: "weather", When: llmtest.Match{LastUserContains: "weather", HasTool: "runnel/get_weather"},
			Reply: llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: "runnel/get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}}}},
		{Name: "date", When: llmtest.Match{LastUserContains: "date", HasTool: "runnel/pick_date"},
			Reply: llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: "runnel/pick_date", Arguments: json.RawMessage(`{"label":"Start"}`)}}}},
		{Name: "hello", Reply: llmtest.Reply{Text: "Hello from the scripted model.", Usage: &llmtest.Usage{Input: 10, Output: 5}}},
	}}
}

// platform is a real toolCallback endpoint answering get_weather.
type platform struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls []string
}

func newPlatform(t *testing.T) *platform {
	t.Helper()
	p := &platform{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		p.mu.Lock()
		p.calls = append(p.calls, string(body))
		p.mu.Unlock()
		fmt.Fprint(w, `{"call":{"id":"x","status":{"code":"STATUS_CODE_OK"},"data":{"role":"tool","tool_call_id":"x","content":"18°C and sunny in Paris"}}}`)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *platform) received() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.calls...)
}

// runnelProc is one `runnel serve` process.
type runnelProc struct {
	url   string
	cmd   *exec.Cmd
	tmp   string // its TMPDIR: agent homes are made under it
	ws    string // its workspace root
	log   *bytes.Buffer
	logMu *sync.Mutex
}

// serve starts `runnel serve` with the agents installed in dir.
func serve(t *testing.T, dir string) *runnelProc {
	t.Helper()
	p := &runnelProc{tmp: t.TempDir(), ws: t.TempDir(), log: &bytes.Buffer{}, logMu: &sync.Mutex{}}
	cmd := exec.Command(os.Getenv(envRunnel), "serve")
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "RUNNEL_PORT=0", "RUNNEL_TOKEN=" + token,
		"RUNNEL_INTERACTION_SECRET=" + secret, "RUNNEL_AGENTS_DIR=" + dir, "RUNNEL_WORKSPACE_ROOT=" + p.ws,
		"TMPDIR=" + p.tmp, "RUNNEL_LOG_LEVEL=debug", "RUNNEL_RUN_TIMEOUT=3m"}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.cmd = cmd
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		p.logMu.Lock()
		leaked := bytes.Contains(p.log.Bytes(), []byte(modelKey))
		p.logMu.Unlock()
		if leaked {
			t.Errorf("runnel's log shows the model key")
		}
		if t.Failed() {
			p.logMu.Lock()
			t.Logf("runnel's log:\n%s", p.log.String())
			p.logMu.Unlock()
		}
	})
	sc := bufio.NewScanner(stderr)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		p.record(sc.Bytes())
		var line struct{ Msg, Addr string }
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "runnel listening" {
			p.url = "http://" + line.Addr
			go func() {
				for sc.Scan() {
					p.record(sc.Bytes())
				}
			}()
			return p
		}
	}
	t.Fatalf("runnel serve never said it was listening:\n%s", p.log.String())
	return nil
}

func (p *runnelProc) record(line []byte) {
	p.logMu.Lock()
	defer p.logMu.Unlock()
	p.log.Write(line)
	p.log.WriteByte('\n')
}

// run posts req as an NDJSON run and returns the result and the events.
func (p *runnelProc) run(t *testing.T, req map[string]any) (*runnel.Result, []runnel.Event) {
	t.Helper()
	body, _ := json.Marshal(req)
	hr, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, p.url+"/run", bytes.NewReader(body))
	hr.Header.Set("Authorization", "Bearer "+token)
	hr.Header.Set("Accept", "application/x-ndjson")
	client := &http.Client{Transport: &http.Transport{}, Timeout: 4 * time.Minute}
	defer client.CloseIdleConnections()
	resp, err := client.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if bytes.Contains(raw, []byte(modelKey)) {
		t.Errorf("the stream shows the model key")
	}
	var events []runnel.Event
	var res *runnel.Result
	for _, line := range bytes.Split(raw, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var rec server.Record
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("record %q: %v", line, err)
		}
		if rec.Event != nil {
			events = append(events, *rec.Event)
		}
		if rec.Result != nil {
			res = rec.Result
		}
	}
	if res == nil {
		t.Fatalf("HTTP %d and no result record:\n%s", resp.StatusCode, raw)
	}
	return res, events
}

// checkClean checks what a finished run must not leave in p: an agent
// process, an agent HOME, a workspace, a listening port of its own.
func (p *runnelProc) checkClean(t *testing.T, dir string) {
	t.Helper()
	// Ending an agent waits for it; a short grace covers the processes
	// the kernel is still reaping.
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := proctest.Naming(dir)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("agent processes outlived their runs: %v", left)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, root := range []string{filepath.Join(p.tmp, "runnel-homes"), p.ws} {
		entries, _ := os.ReadDir(root)
		for _, e := range entries {
			t.Errorf("%s outlived its run", filepath.Join(root, e.Name()))
		}
	}
	if ports := listeningPorts(); len(ports) > 0 {
		mine := p.port()
		for _, port := range ports {
			if port == mine {
				continue
			}
			if owner := portOwner(port); owner == p.cmd.Process.Pid {
				t.Errorf("runnel still listens on port %d after its runs ended", port)
			}
		}
	}
}

func (p *runnelProc) port() int {
	i := strings.LastIndexByte(p.url, ':')
	n, _ := strconv.Atoi(p.url[i+1:])
	return n
}

// listeningPorts are the TCP ports listening in this network namespace.
func listeningPorts() []int {
	var out []int
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) < 4 || fields[3] != "0A" {
				continue
			}
			_, hexPort, _ := strings.Cut(fields[1], ":")
			if n, err := strconv.ParseInt(hexPort, 16, 32); err == nil {
				out = append(out, int(n))
			}
		}
	}
	return out
}

// portOwner is the pid holding the listening socket on port, or 0.
func portOwner(port int) int { return socketOwner(port, "0A") }

// socketOwner is the pid holding the TCP socket of this namespace whose
// local port is port, in state (hex, as /proc/net/tcp writes it: "0A"
// listening, "01" established), or 0.
func socketOwner(port int, state string) int {
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, _ := os.ReadFile(f)
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) < 10 || fields[3] != state {
				continue
			}
			_, hexPort, _ := strings.Cut(fields[1], ":")
			if n, _ := strconv.ParseInt(hexPort, 16, 32); int(n) == port {
				inodes["socket:["+fields[9]+"]"] = true
			}
		}
	}
	procs, _ := os.ReadDir("/proc")
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join("/proc", e.Name(), "fd"))
		for _, fd := range fds {
			if link, err := os.Readlink(filepath.Join("/proc", e.Name(), "fd", fd.Name())); err == nil && inodes[link] {
				return pid
			}
		}
	}
	return 0
}
