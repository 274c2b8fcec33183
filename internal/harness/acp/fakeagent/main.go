// Command fakeagent is a scriptable fake ACP agent for runnel's tests. It
// speaks the Agent Client Protocol (JSON-RPC 2.0, one object per line) on
// stdin and stdout, does what a scenario says, and logs everything it
// received and did, so a test can drive runnel against every quirk real
// agents show (../shared/ACP-AGENTS.md from the module root) and then
// assert what runnel sent.
//
// Tests build it with go build and start it with:
//
//	FAKE_ACP_SCENARIO       a scenario file (JSON), or
//	FAKE_ACP_SCENARIO_JSON  the scenario inline (neither: a zero Scenario)
//	FAKE_ACP_LOG            the log, appended as JSON lines (unset: no log)
//
// Nothing but protocol lines goes to stdout; diagnostics go to stderr. The
// agent exits 0 when stdin ends, 2 on a bad scenario, and 3 (or a crash
// step's code) when the scenario crashes it. A hang (an Answer's or a
// step's) stops it for good: it never reads, writes or exits again, and
// must be killed.
//
// # Scenario
//
// A Scenario (scenario.go has every field) decides the answers to
// initialize, session/new and session/set_mode (each an Answer: delay,
// hang, crash, error; raw fields sent as given, absent meaning the default
// and null leaving the field out), the idStyle of the fake's own requests,
// the $HOME files to report, and the Turns. On each session/prompt the
// first Turn whose whenPromptContains is in the prompt's text (and whose
// whenMode, if set, is the session's mode) runs its Steps, then answers
// with its stopReason — "cancelled" if session/cancel came or a permission
// request was answered cancelled, and an end step's stopReason over both.
// A prompt no turn matches gets a JSON-RPC error. Turns are chosen by
// content, never by counting prompts. testdata/*.json are examples:
// a text turn, Claude's permission-then-MCP call, Gemini's permission
// before any tool_call, and runnel's approval pause.
//
// A Step sets exactly one field ({{last_tool_result}} and {{prompt}} are
// expanded in text, thought and tool-call fields):
//
//	{"text": "Done: {{last_tool_result}}"}        agent_message_chunk
//	{"thought": "about {{prompt}}"}               agent_thought_chunk
//	{"toolCall": {…fields as given…}}             tool_call
//	{"toolCallUpdate": {…fields as given…}}       tool_call_update
//	{"permission": {"toolCall": {…}, "options": […], "onSelected": {"id": […]},
//	                "onAllow": […], "onReject": […], "onCancelled": […]}}
//	{"mcpCall": {"server": "runnel", "tool": "x", "arguments": {…},
//	             "timeout": "5s", "async": false, "ignoreCancel": false}}
//	{"mcpListTools": {"server": "runnel"}}
//	{"notify": {"method": "m", "params": {…}}}    or {"notify": {"update": {…}}}
//	{"raw": "{not json"}                          a line as is ({{session_id}} expanded)
//	{"sleep": "200ms"}
//	{"waitCancel": {"onCancelled": […]}}
//	{"crash": {"code": 3}}
//	{"hang": {}}
//	{"flood": {"bytes": 1048576, "chunk": 4096}}  (no chunk: one line)
//	{"spawn": {"argv": ["sleep", "300"], "setsid": false, "holdStdout": false}}
//	{"readFile": {"path": "/abs", "line": 1, "limit": 10}}
//	{"writeFile": {"path": "/abs", "content": "…"}}
//	{"end": {"stopReason": "end_turn"}}
//
// A session/cancel marks the running prompt cancelled: a waitCancel
// returns, MCP calls without ignoreCancel are abandoned (the client sends
// notifications/cancelled), but a pending permission request waits for the
// client's answer, and other steps run as written (a waitCancel or an
// onCancelled end is how a scenario stops). Unless leaveInProgressOnCancel (Codex 2.6), the calls
// the turn left open get a tool_call_update "failed" before stopReason
// "cancelled". Unknown requests get method-not-found; unknown
// notifications are ignored.
//
// # Log
//
// Each line is a logEntry: {"t":"recv"|"send", "id", "method", "params",
// "result", "error"} for a frame ("raw" for a line that was not one), or
// {"t":"note", "note": name, "data": …}. Notes: process, env, cwd, home
// (at start); mode; permission outcome; cancel seen; mcp connected;
// mcp tools/call (started), mcp tools/call result; mcp tools/list result;
// fs/read_text_file result, fs/write_text_file result; spawn; flood;
// crash; hang; no turn matches; cancel with no prompt running; response
// to an unknown id; bad jsonrpc version; modes unreadable; stdin closed.
// Every entry is written before the frame it describes reaches stdout, so
// once a test has read a frame, the log holds everything up to it.
//
// The happy path in a test:
//
//	cmd := exec.Command(bin)
//	cmd.Env = append(os.Environ(), "FAKE_ACP_LOG="+logPath,
//		`FAKE_ACP_SCENARIO_JSON={"turns":[{"steps":[{"text":"hello"}]}]}`)
//	// initialize, session/new, session/prompt → a session/update with
//	// "hello", then {"stopReason":"end_turn"}.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
)

// config is what main reads from the process, once.
type config struct {
	scenarioFile string
	scenarioJSON string
	logFile      string
	env          []string
	args         []string
	cwd          string
	home         string
	pid          int
	ppid         int
	pgid         int
}

func main() {
	cwd, err := os.Getwd()
	if err != nil {
		cwd = "error: " + err.Error()
	}
	cfg := config{
		scenarioFile: os.Getenv("FAKE_ACP_SCENARIO"),
		scenarioJSON: os.Getenv("FAKE_ACP_SCENARIO_JSON"),
		logFile:      os.Getenv("FAKE_ACP_LOG"),
		env:          os.Environ(),
		args:         os.Args,
		cwd:          cwd,
		home:         os.Getenv("HOME"),
		pid:          os.Getpid(),
		ppid:         os.Getppid(),
		pgid:         syscall.Getpgrp(),
	}
	os.Exit(run(cfg, os.Stdin, os.Stdout, os.Stderr, os.Exit))
}

// run is the agent's whole life; it returns the exit status. exit ends the
// process at once (crash steps).
func run(cfg config, stdin io.Reader, stdout, stderr io.Writer, exit func(int)) int {
	sc, err := loadScenario(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "fakeagent: %v\n", err)
		return 2
	}
	log := &eventLog{stderr: stderr}
	if cfg.logFile != "" {
		f, err := os.OpenFile(cfg.logFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			fmt.Fprintf(stderr, "fakeagent: %v\n", err)
			return 2
		}
		defer f.Close()
		log.w = f
	}

	a := newAgent(sc, stdout, stderr, log, exit)
	a.recordStart(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a.serve(ctx, stdin)

	// The client closed stdin: stop like a real agent, letting what runs
	// see its context end.
	log.note("stdin closed", nil)
	cancel()
	a.conn.closePending()
	a.shutdown(2 * time.Second)
	return 0
}

func loadScenario(cfg config) (*Scenario, error) {
	data := []byte(cfg.scenarioJSON)
	if cfg.scenarioFile != "" {
		var err error
		if data, err = os.ReadFile(cfg.scenarioFile); err != nil {
			return nil, err
		}
	}
	return parseScenario(data)
}
