package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/run"
	"github.com/runnel/runnel/internal/sandbox"
	"github.com/runnel/runnel/internal/server"
	"github.com/runnel/runnel/internal/testlog"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == sandbox.InitCommand {
		os.Exit(sandbox.Init(os.Args[2:])) // the isolated sandbox's init, as in main
	}
	goleak.VerifyTestMain(m)
}

// fakeRunner answers every request with "echo: <last user text>", or with
// the result or error it is given; it records the options it was built with.
type fakeRunner struct {
	opts *run.Options
	res  *runnel.Result
	err  error
}

func (f *fakeRunner) Harnesses() []string { return []string{"native", "fake"} }

func (f *fakeRunner) Run(ctx context.Context, req *runnel.RunRequest, sink runnel.Sink) (*runnel.Result, error) {
	if f.err != nil || f.res != nil {
		return f.res, f.err
	}
	text := "echo: " + req.Messages[len(req.Messages)-1].Text()
	sink.Emit(runnel.Event{Type: runnel.EventMessageStart, ID: "m1"})
	sink.Emit(runnel.Event{Type: runnel.EventMessageDelta, ID: "m1", Delta: text})
	sink.Emit(runnel.Event{Type: runnel.EventMessageEnd, ID: "m1"})
	sink.Emit(runnel.Event{Type: runnel.EventDone, StopReason: runnel.StopEndTurn})
	return &runnel.Result{OK: true, Status: runnel.StatusCompleted, Output: text, StopReason: runnel.StopEndTurn}, nil
}

type ran struct {
	Code           int
	Stdout, Stderr string
}

// runMain runs one command to completion in-process.
func runMain(t *testing.T, env map[string]string, stdin string, runner *fakeRunner, args ...string) ran {
	t.Helper()
	var stdout, stderr testlog.Buffer
	m := &Main{Stdin: strings.NewReader(stdin), Stdout: &stdout, Stderr: &stderr, Getenv: mapEnv(env)}
	if runner != nil {
		m.NewRunner = func(o *run.Options) Runner { runner.opts = o; return runner }
	}
	code := m.Run(t.Context(), args)
	return ran{code, stdout.String(), stderr.String()}
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute): // only turns a hang into a readable failure
		t.Fatalf("gave up waiting for %s", what)
		panic("unreachable")
	}
}

func TestVersionAndHelp(t *testing.T) {
	tests := []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"version"}, 0, version + "\n", ""},
		{[]string{"help"}, 0, usage, ""},
		{nil, 2, "", usage},
		{[]string{"frobnicate"}, 2, "", "runnel: unknown command \"frobnicate\"\n\n" + usage},
	}
	for _, tt := range tests {
		got := runMain(t, nil, "", nil, tt.args...)
		if diff := cmp.Diff(ran{tt.code, tt.stdout, tt.stderr}, got); diff != "" {
			t.Errorf("runnel %q (-want +got):\n%s", tt.args, diff)
		}
	}
}

func TestServeStartupRefusals(t *testing.T) {
	tests := []struct {
		name   string
		env    map[string]string
		args   []string
		stderr string
	}{
		{"non-loopback without a token", map[string]string{"RUNNEL_HOST": "0.0.0.0"}, nil,
			"runnel serve: refusing to listen on 0.0.0.0:8765 without a token; set RUNNEL_TOKEN (generate one with: openssl rand -hex 32)\n"},
		{"bad number", map[string]string{"RUNNEL_CONCURRENCY_LIMIT": "lots"}, nil,
			"runnel serve: RUNNEL_CONCURRENCY_LIMIT=\"lots\" is not a whole number from 1 to 1048576\n"},
		{"negative duration and unknown level", map[string]string{"RUNNEL_SHUTDOWN_GRACE": "-1s", "RUNNEL_LOG_LEVEL": "loud"}, nil,
			"runnel serve: RUNNEL_SHUTDOWN_GRACE=\"-1s\" must be a positive duration such as 30s\n" +
				"runnel serve: RUNNEL_LOG_LEVEL=\"loud\" is not a log level; use debug, info, warn or error\n"},
		{"stray argument", nil, []string{"now"}, "usage: runnel serve [--playground] [flags]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runMain(t, tt.env, "", &fakeRunner{}, append([]string{"serve"}, tt.args...)...)
			if got.Code != exitUsage || !strings.HasPrefix(got.Stderr, tt.stderr) || got.Stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2 and %q", got.Code, got.Stdout, got.Stderr, tt.stderr)
			}
		})
	}
}

// startDaemon runs `runnel serve` on a free loopback port until the
// returned stop, which waits for the exit code. A nil runner means the
// real run manager.
func startDaemon(t *testing.T, env map[string]string, runner *fakeRunner) (url string, stderr *testlog.Buffer, stop func() int) {
	t.Helper()
	stderr = &testlog.Buffer{}
	addrs := make(chan net.Addr, 1)
	m := &Main{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: stderr, Getenv: mapEnv(env),
		Listening: func(a net.Addr) { addrs <- a }}
	if runner != nil { // nil: the real run manager
		m.NewRunner = func(o *run.Options) Runner { runner.opts = o; return runner }
	}
	ctx, cancel := context.WithCancel(context.Background())
	exit := make(chan int, 1)
	go func() { exit <- m.Run(ctx, []string{"serve", "--port", "0"}) }()
	select {
	case a := <-addrs:
		url = "http://" + a.String()
	case code := <-exit:
		cancel()
		t.Fatalf("serve exited %d before listening:\n%s", code, stderr)
	}
	stop = sync.OnceValue(func() int {
		cancel()
		return recv(t, exit, "serve to exit")
	})
	t.Cleanup(func() { stop() })
	return url, stderr, stop
}

func TestServeEndToEnd(t *testing.T) {
	const token = "e2e-token-0123456789abcdef"
	runner := &fakeRunner{}
	url, stderr, stop := startDaemon(t, map[string]string{"RUNNEL_TOKEN": token, "RUNNEL_MAX_STEPS": "9"}, runner)
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()

	resp, err := client.Get(url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	var health map[string]any
	json.NewDecoder(resp.Body).Decode(&health)
	resp.Body.Close()
	want := map[string]any{"status": "ok", "runner": version, "protocol": 1.0,
		"harnesses": []any{"native", "fake"}, "features": []any{"ndjson", "permissions", "pause_resume", "client_tools", "builtins", "mcp", "code_mode", "model_connection", "attachments", "kill", "acp", "ui_message_stream"},
		"sandboxes": []any{"local"}}
	if os.Getenv("RUNNEL_TEST_REQUIRE_ISOLATION") != "" || slices.Contains(health["sandboxes"].([]any), "isolated") {
		want["sandboxes"] = []any{"local", "isolated"}
	}
	if diff := cmp.Diff(want, health); diff != "" {
		t.Errorf("health (-want +got):\n%s", diff)
	}

	post := func(header ...string) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodPost, url+"/run", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	if resp, body := post(); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the token: %d %s", resp.StatusCode, body)
	}
	resp, body := post("Authorization", "Bearer "+token)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"output":"echo: hi"`) {
		t.Errorf("with the token: %d %s", resp.StatusCode, body)
	}
	if runner.opts.MaxSteps != 9 || runner.opts.Logger == nil {
		t.Errorf("run options %+v, want MaxSteps 9 and a logger", runner.opts)
	}

	if code := stop(); code != exitOK {
		t.Errorf("exit %d after SIGTERM-like cancel, want 0", code)
	}
	logs := stderr.String()
	if !strings.Contains(logs, `"msg":"runnel listening"`) || !strings.Contains(logs, `"msg":"stopped"`) {
		t.Errorf("logs lack the listening or stopped line:\n%s", logs)
	}
	if strings.Contains(logs, token) {
		t.Errorf("the token reached the logs")
	}
	if strings.Contains(logs, "no token set") {
		t.Errorf("warned about a missing token that is set")
	}
}

func TestServeOnLoopbackWithoutTokenWarnsOnce(t *testing.T) {
	_, stderr, stop := startDaemon(t, map[string]string{"RUNNEL_LOG_FORMAT": "text"}, &fakeRunner{})
	if code := stop(); code != exitOK {
		t.Errorf("exit %d", code)
	}
	if n := strings.Count(stderr.String(), "no token set"); n != 1 {
		t.Errorf("%d warnings about the missing token, want 1:\n%s", n, stderr)
	}
}

func TestRunCommand(t *testing.T) {
	file := filepath.Join(t.TempDir(), "req.json")
	if err := os.WriteFile(file, []byte(`{"messages":[{"role":"user","content":"from a file"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	stdin := `{"messages":[{"role":"user","content":"from stdin"}]}`
	okResult := func(text string) string {
		b, _ := json.MarshalIndent(&runnel.Result{OK: true, Status: runnel.StatusCompleted, Output: text, StopReason: runnel.StopEndTurn,
			Events: []runnel.Event{{Type: runnel.EventMessage, Text: text}, {Type: runnel.EventDone, StopReason: runnel.StopEndTurn}}}, "", "  ")
		return string(b) + "\n"
	}
	tests := []struct {
		name   string
		args   []string
		runner *fakeRunner
		code   int
		stdout string // exact, or a prefix when it ends in "…"
		stderr string // a substring
	}{
		{name: "file", args: []string{file}, code: 0, stdout: okResult("echo: from a file")},
		{name: "stdin by default", code: 0, stdout: okResult("echo: from stdin")},
		{name: "stdin as -", args: []string{"-"}, code: 0, stdout: okResult("echo: from stdin")},
		{name: "stream after the file", args: []string{file, "--stream"}, code: 0, stdout: `{"kind":"event","event":{"type":"message_start","id":"m1"}}
{"kind":"event","event":{"type":"message_delta","id":"m1","delta":"echo: from a file"}}
{"kind":"event","event":{"type":"message_end","id":"m1"}}
{"kind":"event","event":{"type":"done","stopReason":"end_turn"}}
{"kind":"result","result":{"ok":true,"status":"completed","output":"echo: from a file","messages":null,"usage":{"input":0,"output":0,"total":0,"cost":0},"stopReason":"end_turn","interactions":null}}
`},
		{name: "failed run", runner: &fakeRunner{res: &runnel.Result{Status: runnel.StatusFailed, Error: "model said no",
			ErrorCode: runnel.CodeProviderError}}, code: 1, stdout: "{\n  \"ok\": false,\n  \"status\": \"failed\",…"},
		{name: "refused", runner: &fakeRunner{err: runnel.Errorf(runnel.CodeRefused, "no such harness")}, args: []string{"--stream"},
			code: 1, stdout: `{"kind":"result","result":{"ok":false,"status":"failed",…`},
		{name: "internal error is logged", runner: &fakeRunner{err: io.ErrUnexpectedEOF}, code: 1,
			stdout: "{\n  \"ok\": false,…", stderr: "unexpected EOF"},
		{name: "missing file", args: []string{"/nonexistent/req.json"}, code: 2,
			stderr: "runnel run: reading the request: open /nonexistent/req.json: no such file or directory"},
		{name: "two files", args: []string{file, file}, code: 2, stderr: "one request file at most, got 2"},
		{name: "unknown flag", args: []string{"--frob"}, code: 2, stderr: "flag provided but not defined: -frob"},
		{name: "bad setting", args: []string{"--run-timeout", "forever"}, code: 2,
			stderr: `runnel run: --run-timeout="forever" is not a duration`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.runner
			if r == nil {
				r = &fakeRunner{}
			}
			got := runMain(t, nil, stdin, r, append([]string{"run"}, tt.args...)...)
			if got.Code != tt.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", got.Code, tt.code, got.Stderr)
			}
			if prefix, ok := strings.CutSuffix(tt.stdout, "…"); ok {
				if !strings.HasPrefix(got.Stdout, prefix) {
					t.Errorf("stdout %q, want it to start with %q", got.Stdout, prefix)
				}
			} else if diff := cmp.Diff(tt.stdout, got.Stdout); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if !strings.Contains(got.Stderr, tt.stderr) {
				t.Errorf("stderr %q lacks %q", got.Stderr, tt.stderr)
			}
		})
	}
}

func TestRunCommandInvalidJSON(t *testing.T) {
	got := runMain(t, nil, `{"messages":`, &fakeRunner{}, "run")
	var res runnel.Result
	if err := json.Unmarshal([]byte(got.Stdout), &res); err != nil {
		t.Fatalf("stdout is not a result: %v\n%s", err, got.Stdout)
	}
	if got.Code != 1 || res.ErrorCode != runnel.CodeInvalidRequest || !strings.HasPrefix(res.Error, "invalid JSON: ") {
		t.Errorf("exit %d, result %+v", got.Code, res)
	}
}

// lineWatcher hands each stderr line to the test as it is written.
type lineWatcher struct {
	mu    sync.Mutex
	buf   []byte
	lines chan string
}

func (l *lineWatcher) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		select {
		case l.lines <- string(l.buf[:i]):
		default: // nobody is listening for more lines
		}
		l.buf = l.buf[i+1:]
	}
}

func TestMockllm(t *testing.T) {
	stderr := &lineWatcher{lines: make(chan string, 16)}
	m := &Main{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: stderr}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exit := make(chan int, 1)
	go func() { exit <- m.Run(ctx, []string{"mockllm", "--addr", "127.0.0.1:0"}) }()
	var listening struct {
		Msg string `json:"msg"`
		URL string `json:"openai_base_url"`
	}
	for listening.Msg != "mockllm listening" {
		if err := json.Unmarshal([]byte(recv(t, stderr.lines, "the listening line")), &listening); err != nil {
			t.Fatal(err)
		}
	}
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Post(listening.URL+"/chat/completions", "application/json",
		strings.NewReader(`{"model":"gpt-test","messages":[{"role":"user","content":"ping"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(bufio.NewReader(resp.Body))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "You said: ping") {
		t.Errorf("default script answered %d %s", resp.StatusCode, body)
	}
	cancel()
	if code := recv(t, exit, "mockllm to exit"); code != exitOK {
		t.Errorf("exit %d", code)
	}
}

func TestMockllmBadScript(t *testing.T) {
	got := runMain(t, nil, "", nil, "mockllm", "--script", "/nonexistent/script.json")
	if got.Code != exitUsage || !strings.Contains(got.Stderr, "runnel mockllm: llmtest: read script") {
		t.Errorf("exit %d, stderr %q", got.Code, got.Stderr)
	}
}

var _ server.Runner = (*fakeRunner)(nil)
