package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"time"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/llmtest"
	"github.com/runnel/runnel/internal/playground"
	"github.com/runnel/runnel/internal/server"
)

// demo runs the whole main job on loopback with nothing installed and no
// key: a scripted model, the platform's tool endpoint, and runnel serving
// the playground with one run profile over them. A newcomer sees a
// streamed answer, an approval pause and its resume, and a client tool
// (a "connect" widget) pause.
func (m *Main) demo(ctx context.Context, args []string) int {
	fs := m.flagSet("demo", "runnel demo [--addr ADDR] [--no-open]")
	addr := fs.String("addr", "127.0.0.1:8765", "address runnel listens on (loopback only; port 0 picks a free one)")
	noOpen := fs.Bool("no-open", false, "print the playground's URL without opening a browser")
	c := newConfig(fs, m.Getenv, "log")
	pos, code, done := parse(fs, args)
	if done {
		return code
	}
	if len(pos) > 0 {
		fs.Usage()
		return exitUsage
	}
	cfg, err := c.load()
	if err != nil {
		return m.fail("demo", err)
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil || !isLoopback(host) {
		return m.fail("demo", fmt.Errorf("--addr %q must be a loopback address such as 127.0.0.1:8765: the demo has no token", *addr))
	}
	log := cfg.logger(m.Stderr)

	// The model and the tool endpoint share one loopback listener.
	backLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return m.fail("demo", err)
	}
	back := "http://" + backLn.Addr().String()
	model := llmtest.NewServeHandler(demoScript(), log.With(slog.String("component", "demo-model")))
	mux := http.NewServeMux()
	mux.HandleFunc("POST /tools/call", demoTools)
	mux.Handle("/", model)
	backSrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = backSrv.Serve(backLn) }()
	defer func() {
		model.Close()
		_ = backSrv.Close()
	}()

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return m.fail("demo", err)
	}
	// The demo is `serve --playground` over the scripted model: RUNNEL_*
	// settings apply to it as to serve (a token, signing, limits).
	full, err := newConfig(m.flagSet("demo", ""), m.Getenv, "listen", "run", "agents").load()
	if err != nil {
		return m.fail("demo", err)
	}
	full.LogLevel, full.LogFormat = cfg.LogLevel, cfg.LogFormat
	url := "http://" + ln.Addr().String() + "/playground/"
	fmt.Fprintf(m.Stdout, "runnel demo: the playground is at %s\n"+
		"  Try \"Say hello\" (a streamed answer), \"Delete a file\" (runnel pauses for your approval)\n"+
		"  and \"Connect my drive\" (a client tool: the browser completes it). The model is scripted:\n"+
		"  no key, no network. Ctrl-C stops everything.\n", url)
	if !*noOpen {
		openBrowser(url)
	}
	return m.serveOn(ctx, "demo", full, log, ln, func(o *server.Options) {
		o.Playground = playground.Handler()
		o.Profiles = []server.Profile{{
			Name: "demo", Label: "Scripted demo model (no key)", Model: "openai/demo", Default: true,
			Run: func() (*runnel.RunRequest, error) { return demoRun(back), nil },
		}}
	})
}

// demoRun is the demo profile's run: no builtins (nothing runs on this
// machine), a read-only callback tool, one that needs approval, and a
// client tool the browser completes.
func demoRun(back string) *runnel.RunRequest {
	obj := func(props string, required ...string) json.RawMessage {
		r, _ := json.Marshal(required)
		return json.RawMessage(`{"type":"object","properties":` + props + `,"required":` + string(r) + `}`)
	}
	readOnly := true
	return &runnel.RunRequest{
		Model:    "openai/demo",
		Endpoint: &runnel.Endpoint{BaseURL: back + "/v1"},
		// The scripted model takes any key; this one appears in no text.
		Secrets:      map[string]string{"OPENAI_API_KEY": "sk-runnel-demo-not-a-key"},
		SystemPrompt: "You are runnel's demo assistant.",
		Tools:        []string{},
		CustomTools: []runnel.ToolSpec{
			{Name: "get_weather", Description: "Current weather for a city", ReadOnly: &readOnly,
				InputSchema: obj(`{"city":{"type":"string"}}`, "city")},
			{Name: "delete_file", Description: "Delete a file from the user's drive",
				InputSchema: obj(`{"path":{"type":"string"}}`, "path")},
			{Name: "connect_account", Description: "Ask the user to connect an account", Kind: runnel.ToolKindClient,
				InputSchema: obj(`{"service":{"type":"string"}}`, "service"),
				Render:      json.RawMessage(`{"kind":"connect","url":"/playground/connect-demo.html","title":"Demo Drive"}`)},
		},
		ToolCallback: &runnel.ToolCallback{Endpoint: back + "/tools/call"},
	}
}

// demoScript is what the demo's model says: each prompt of the walk-through
// has its rule, and the replies to tool results come before them.
func demoScript() llmtest.Script {
	slow := func(r llmtest.Reply) llmtest.Reply {
		r.ChunkSize, r.TokenDelayMs = 6, 25
		return r
	}
	call := func(name, args string) []llmtest.ToolCall {
		return []llmtest.ToolCall{{Name: name, Arguments: json.RawMessage(args)}}
	}
	tool := llmtest.RoleTool
	return llmtest.Script{Rules: []llmtest.Rule{
		{Name: "denied", When: llmtest.Match{LastRole: tool, LastToolResultContains: "denied"},
			Reply: slow(llmtest.Reply{Text: "Understood: I left notes/q3-draft.txt alone."})},
		{Name: "deleted", When: llmtest.Match{LastRole: tool, LastToolResultContains: "Deleted"},
			Reply: slow(llmtest.Reply{Text: "Done. {{last_tool_result}}"})},
		{Name: "connected", When: llmtest.Match{LastRole: tool, LastToolResultContains: `"connected":true`},
			Reply: slow(llmtest.Reply{Text: "Connected: your Demo Drive account is linked."})},
		{Name: "not connected", When: llmtest.Match{LastRole: tool, LastToolResultContains: `"connected":false`},
			Reply: slow(llmtest.Reply{Text: "Your Demo Drive was not connected ({{last_tool_result}}). Ask again whenever you like."})},
		{Name: "weather", When: llmtest.Match{LastRole: tool},
			Reply: slow(llmtest.Reply{Text: "Here is the weather: {{last_tool_result}}"})},
		{Name: "delete", When: llmtest.Match{LastUserContains: "delete"},
			Reply: llmtest.Reply{Text: "I will delete it; runnel asks you first.", ToolCalls: call("delete_file", `{"path":"notes/q3-draft.txt"}`)}},
		{Name: "connect", When: llmtest.Match{LastUserContains: "connect"},
			Reply: llmtest.Reply{Text: "Let's connect your Demo Drive.", ToolCalls: call("connect_account", `{"service":"Demo Drive"}`)}},
		{Name: "ask weather", When: llmtest.Match{LastUserContains: "weather"},
			Reply: llmtest.Reply{ToolCalls: call("get_weather", `{"city":"Paris"}`)}},
		// A model whose connection breaks mid-answer: how a failure looks.
		{Name: "fail", When: llmtest.Match{LastUserContains: "fail"},
			Reply: llmtest.Reply{Text: "Partial answer, and then the model's connection breaks.", ChunkSize: 8},
			Fault: &llmtest.Fault{Kind: llmtest.FaultCut, AfterChunks: 4}},
		{Name: "hello", Reply: slow(llmtest.Reply{
			Reasoning: "The user said: {{last_user}}. I should explain what this demo shows.",
			Text: "Hello! I am a scripted model, so this demo needs no key and no network. " +
				"runnel streams what I write as it arrives. Ask me to delete a file and runnel pauses " +
				"for your approval; ask me to connect your drive and your browser completes a client tool; " +
				"ask about the weather and a read-only tool runs without asking.",
		})},
	}}
}

// demoTools is the platform's tool endpoint for the demo (DESIGN §4.2):
// it answers the callback envelope, and deletes nothing.
func demoTools(w http.ResponseWriter, r *http.Request) {
	var env struct {
		Data struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments struct {
					City string `json:"city"`
					Path string `json:"path"`
				} `json:"arguments"`
			} `json:"function"`
		} `json:"data"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&env); err != nil {
		http.Error(w, "bad envelope", http.StatusBadRequest)
		return
	}
	f := env.Data.Function
	var out string
	switch f.Name {
	case "get_weather":
		out = fmt.Sprintf("18°C and sunny in %s", f.Arguments.City)
	case "delete_file":
		out = fmt.Sprintf("Deleted %s (a demo: nothing was really deleted).", f.Arguments.Path)
	default:
		http.Error(w, "unknown tool", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"call": map[string]any{
		"id": env.Data.ID, "status": map[string]string{"code": "STATUS_CODE_OK"},
		"data": map[string]string{"role": "tool", "tool_call_id": env.Data.ID, "content": out},
	}})
}

// openBrowser opens url where a desktop can; elsewhere the printed URL
// is enough.
func openBrowser(url string) {
	if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return
	}
	path, err := exec.LookPath("xdg-open")
	if errors.Is(err, exec.ErrNotFound) || err != nil {
		return
	}
	cmd := exec.Command(path, url)
	if cmd.Start() == nil {
		go func() { _ = cmd.Wait() }()
	}
}
