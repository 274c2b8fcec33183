package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// readTimeout bounds every wait for the agent; a test that hits it failed.
const readTimeout = 15 * time.Second

// buildAgent builds the fake agent as the tests run it: a program of its own.
func buildAgent(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fakeagent")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// line is one line the agent wrote: its frame, and the line itself for
// the ones that are not JSON-RPC.
type line struct {
	frame
	raw string
}

func (l line) update() map[string]any {
	var p struct {
		Update map[string]any `json:"update"`
	}
	if l.Method != "session/update" || json.Unmarshal(l.Params, &p) != nil {
		return nil
	}
	return p.Update
}

// fake is one running agent, driven over its pipes the way runnel drives it.
type fake struct {
	t       *testing.T
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   chan line
	stop    chan struct{}
	exited  chan struct{}
	exitErr error
	dir     string
	logPath string
	stderr  string
	nextID  int
}

// startFake starts the agent with a scenario in a fresh directory (its
// cwd and HOME) in a process group of its own, and ends the whole group
// when the test does.
func startFake(t *testing.T, bin, scenario string, env ...string) *fake {
	t.Helper()
	dir := t.TempDir()
	f := &fake{
		t:       t,
		lines:   make(chan line, 1024),
		stop:    make(chan struct{}),
		exited:  make(chan struct{}),
		dir:     dir,
		logPath: filepath.Join(dir, "log.jsonl"),
		stderr:  filepath.Join(dir, "stderr"),
	}
	stderr, err := os.Create(f.stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	f.cmd = exec.Command(bin)
	f.cmd.Dir = dir
	f.cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + dir,
		"FAKE_ACP_LOG=" + f.logPath,
		"FAKE_ACP_SCENARIO_JSON=" + scenario,
	}, env...)
	f.cmd.Stderr = stderr
	f.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if f.stdin, err = f.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := f.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer close(f.lines)
		r := bufio.NewReader(stdout)
		for {
			b, err := r.ReadBytes('\n')
			if len(b) > 0 {
				l := line{raw: strings.TrimSuffix(string(b), "\n")}
				if json.Unmarshal(b, &l.frame) != nil {
					l.frame = frame{}
				}
				select {
				case f.lines <- l:
				case <-f.stop: // the test is over: drain, so the agent never blocks
				}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		<-readerDone // Wait closes stdout: read it all first
		f.exitErr = f.cmd.Wait()
		close(f.exited)
	}()
	t.Cleanup(f.close)
	return f
}

// close ends the agent: stdin first, as runnel does, then the whole group.
func (f *fake) close() {
	close(f.stop)
	f.stdin.Close()
	select {
	case <-f.exited:
	case <-time.After(5 * time.Second):
	}
	f.kill()
	if data, _ := os.ReadFile(f.stderr); len(data) > 0 && f.t.Failed() {
		f.t.Logf("agent stderr:\n%s", data)
	}
}

// kill ends the agent's process group and waits for the agent.
func (f *fake) kill() {
	_ = syscall.Kill(-f.cmd.Process.Pid, syscall.SIGKILL)
	<-f.exited
}

func (f *fake) write(v any) {
	f.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		f.t.Fatal(err)
	}
	f.writeLine(string(b))
}

func (f *fake) writeLine(s string) {
	f.t.Helper()
	if _, err := io.WriteString(f.stdin, s+"\n"); err != nil {
		f.t.Fatalf("writing to the agent: %v", err)
	}
}

type msg map[string]any

// request sends a request and returns its id.
func (f *fake) request(method string, params any) int {
	f.t.Helper()
	f.nextID++
	f.write(msg{"jsonrpc": "2.0", "id": f.nextID, "method": method, "params": params})
	return f.nextID
}

func (f *fake) notify(method string, params any) {
	f.t.Helper()
	f.write(msg{"jsonrpc": "2.0", "method": method, "params": params})
}

// respond answers one of the agent's requests, echoing its id as sent.
func (f *fake) respond(id json.RawMessage, result any) {
	f.t.Helper()
	f.write(msg{"jsonrpc": "2.0", "id": id, "result": result})
}

// next is the agent's next line; it fails the test after readTimeout or
// when the agent exits.
func (f *fake) next() line {
	f.t.Helper()
	select {
	case l, ok := <-f.lines:
		if !ok {
			f.t.Fatalf("the agent exited (%v); stderr: %s", f.wait(), f.stderrText())
		}
		return l
	case <-time.After(readTimeout):
		f.t.Fatal("no line from the agent in time")
	}
	panic("unreachable")
}

// until reads lines up to and including the first that match accepts.
func (f *fake) until(match func(line) bool) []line {
	f.t.Helper()
	var got []line
	for {
		l := f.next()
		got = append(got, l)
		if match(l) {
			return got
		}
	}
}

func isResponse(id int) func(line) bool {
	want := strconv.Itoa(id)
	return func(l line) bool { return l.Method == "" && string(l.ID) == want }
}

// call sends a request and returns its response and what came before it.
func (f *fake) call(method string, params any) (line, []line) {
	f.t.Helper()
	got := f.until(isResponse(f.request(method, params)))
	return got[len(got)-1], got[:len(got)-1]
}

// handshake is runnel's start: initialize and session/new. It returns the
// session id.
func (f *fake) handshake(mcpServers ...any) string {
	f.t.Helper()
	if resp, _ := f.call("initialize", msg{
		"protocolVersion":    1,
		"clientCapabilities": msg{"fs": msg{"readTextFile": true, "writeTextFile": true}, "terminal": false},
	}); resp.Error != nil {
		f.t.Fatalf("initialize: %v", resp.Error)
	}
	if mcpServers == nil {
		mcpServers = []any{}
	}
	resp, _ := f.call("session/new", msg{"cwd": f.dir, "mcpServers": mcpServers})
	var r struct {
		SessionID string `json:"sessionId"`
	}
	if resp.Error != nil || json.Unmarshal(resp.Result, &r) != nil {
		f.t.Fatalf("session/new: %s", resp.raw)
	}
	return r.SessionID
}

func promptParams(sessionID, text string) msg {
	return msg{"sessionId": sessionID, "prompt": []msg{{"type": "text", "text": text}}}
}

// stopReason is a session/prompt response's.
func stopReason(t *testing.T, l line) string {
	t.Helper()
	var r struct {
		StopReason string `json:"stopReason"`
	}
	if l.Error != nil || json.Unmarshal(l.Result, &r) != nil {
		t.Fatalf("not a prompt result: %s", l.raw)
	}
	return r.StopReason
}

// wait waits for the agent to exit and returns how it did.
func (f *fake) wait() error {
	select {
	case <-f.exited:
		return f.exitErr
	case <-time.After(readTimeout):
		return errors.New("still running")
	}
}

func exitCode(err error) int {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err == nil {
		return 0
	}
	return -100
}

func (f *fake) stderrText() string {
	data, _ := os.ReadFile(f.stderr)
	return string(data)
}

// entries is the agent's log so far.
func (f *fake) entries() []logEntry {
	f.t.Helper()
	data, err := os.ReadFile(f.logPath)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []logEntry
	for l := range strings.Lines(string(data)) {
		var e logEntry
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			f.t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, e)
	}
	return out
}

// notes decodes the data of the log's notes called name into a new T each.
func notes[T any](f *fake, name string) []T {
	f.t.Helper()
	var out []T
	for _, e := range f.entries() {
		if e.T == "note" && e.Note == name {
			var v T
			if err := json.Unmarshal(e.Data, &v); err != nil {
				f.t.Fatalf("note %s: %v", name, err)
			}
			out = append(out, v)
		}
	}
	return out
}

// waitNote polls the log until a note called name appears: an async
// result has no frame to wait for.
func waitNote[T any](f *fake, name string) T {
	f.t.Helper()
	deadline := time.Now().Add(readTimeout)
	for time.Now().Before(deadline) {
		if got := notes[T](f, name); len(got) > 0 {
			return got[0]
		}
		time.Sleep(10 * time.Millisecond)
	}
	f.t.Fatalf("no %q note in the log", name)
	panic("unreachable")
}

func scenarioJSON(t *testing.T, s string) string {
	t.Helper()
	if _, err := parseScenario([]byte(s)); err != nil {
		t.Fatalf("%v\n%s", err, s)
	}
	return s
}

func texts(lines []line) []string {
	var out []string
	for _, l := range lines {
		if u := l.update(); u != nil && u["sessionUpdate"] == "agent_message_chunk" {
			out = append(out, fmt.Sprint(u["content"].(map[string]any)["text"]))
		}
	}
	return out
}
