package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/runnel/runnel/bench/internal/benchkit"
	"github.com/runnel/runnel/internal/llmtest"
)

// The fixed parts of the benchmark conversation. Every contestant offers the
// same tool with the same schema and receives the same scripted replies.
const (
	toolName   = "echo"
	toolDesc   = "Echo n back."
	toolSchema = `{"type":"object","properties":{"n":{"type":"number"}},"required":["n"]}`
	toolArgs   = `{"n":1}`
	prompt     = "Call echo until told to stop."
	finalText  = "done"
	modelName  = "bench-model"
	toolOutput = "ok"
	// apiKey is what every contestant sends as its model key: as long as a
	// real one, so runnel's redaction of secrets does real work.
	apiKey = "sk-bench-0123456789abcdef0123456789abcdef"
)

// benchScript scripts the fake model by conversation content, never by a
// request counter: while the conversation holds fewer than results tool
// results it calls echo, then it answers text. With results = the replayed
// history's results + steps, every contestant's turn makes steps+1 model
// calls and steps tool calls.
func benchScript(results int) llmtest.Script {
	return llmtest.Script{Rules: []llmtest.Rule{
		{
			Name:  "answer",
			When:  llmtest.Match{ToolResultsAtLeast: &results},
			Reply: llmtest.Reply{Text: finalText},
		},
		{
			Name: "call-echo",
			When: llmtest.Match{ToolResultsBelow: &results},
			Reply: llmtest.Reply{ToolCalls: []llmtest.ToolCall{
				{Name: toolName, Arguments: json.RawMessage(toolArgs)},
			}},
		},
	}}
}

// fakeURLs is what the fakes process announces on its stdout.
type fakeURLs struct {
	Model    string `json:"model"`    // OpenAI base URL, ending in /v1
	Callback string `json:"callback"` // the toolCallback endpoint
}

// serveFakes is the -serve-fakes role: the fake model and the callback
// server in one process of their own, so that no contestant shares a Go
// runtime (scheduler, GC) with them. It prints the URLs as one JSON line and
// serves until its stdin closes. The model records no request (a round of
// 200-step turns would otherwise keep gigabytes of conversation).
func serveFakes(results int) error {
	llm, err := benchkit.ServeModel(benchScript(results))
	if err != nil {
		return err
	}
	defer llm.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	cb := &http.Server{Handler: benchkit.CallbackHandler(toolName, toolOutput), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = cb.Serve(ln) }()
	defer cb.Close()
	urls := fakeURLs{Model: llm.URL + "/v1", Callback: "http://" + ln.Addr().String() + "/tools/call"}
	if err := json.NewEncoder(os.Stdout).Encode(urls); err != nil {
		return fmt.Errorf("announce: %w", err)
	}
	_, _ = io.Copy(io.Discard, os.Stdin) // the driver closes stdin (or dies)
	return nil
}

// fakes is the running fakes process.
type fakes struct {
	fakeURLs
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// startFakes re-executes this program in its -serve-fakes role; results is
// benchScript's.
func startFakes(ctx context.Context, results int) (*fakes, error) {
	cmd, stdin, stdout, err := benchkit.StartSelf(ctx, "-serve-fakes", "-fake-results", strconv.Itoa(results))
	if err != nil {
		return nil, fmt.Errorf("start fakes: %w", err)
	}
	f := &fakes{cmd: cmd, stdin: stdin}
	line, err := stdout.ReadBytes('\n')
	if err == nil {
		err = json.Unmarshal(line, &f.fakeURLs)
	}
	if err != nil {
		f.close()
		return nil, fmt.Errorf("fakes did not announce their URLs: %w", err)
	}
	return f, nil
}

func (f *fakes) close() {
	_ = f.stdin.Close()
	benchkit.StopProcess(f.cmd, nil, 5*time.Second)
}

// errUnexpected marks a run that did not do what the script says.
var errUnexpected = errors.New("unexpected run")
