package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/bench/internal/benchkit"
	"github.com/runnel/runnel/internal/agents"
	"github.com/runnel/runnel/internal/llmtest"
)

// The first-text turn: every agent is asked the same thing and the
// scripted model answers it with the same text.
const (
	helloPrompt = "Say hello"
	helloText   = "Hello from the scripted model."
	// modelKey is the model key every run carries, as long as a real one.
	modelKey = "sk-bench-acp-0123456789abcdef0123456789"
	// token is runnel's bearer token in this benchmark.
	token = "bench-acp-token-0123456789abcdef"
)

// helloScript answers every model request with helloText, except the
// side calls agents make (a session title), which get a title so that they
// end as quickly as they would against a real provider. Rules match on
// content only: agents make side calls that would shift a counter.
func helloScript() llmtest.Script {
	title := llmtest.Reply{Text: `{"title":"A test"}`}
	return llmtest.Script{Rules: []llmtest.Rule{
		{Name: "claude-title", When: llmtest.Match{SystemContains: "naming a coding session"}, Reply: title},
		{Name: "codex-title", When: llmtest.Match{LastUserContains: "generate a very short title"}, Reply: title},
		{Name: "hello", Reply: llmtest.Reply{Text: helloText, Usage: &llmtest.Usage{Input: 10, Output: 5}}},
	}}
}

// harnessCase is one agent and its model, both as runnel's request names
// it and as runnel's launch recipe receives it (internal/run resolves the
// request's model into exactly this agents.Model).
type harnessCase struct {
	name     string
	provider string // the request's "provider/" and agents.Model.Provider
	api      string // agents.Model.API, as internal/run resolves the provider
	modelID  string
	keyName  string
	// openAIBase: the endpoint is the server's /v1 (OpenAI clients)
	// rather than its root (Anthropic clients).
	openAIBase bool
}

// harnessCases are the agents this benchmark knows how to script, with
// the request shapes internal/agenttest uses for them.
func harnessCases() []harnessCase {
	return []harnessCase{
		{name: "claude", provider: "anthropic", api: "anthropic", modelID: "claude-test", keyName: "ANTHROPIC_API_KEY"},
		// A model Codex does not know: runnel gives it a catalog entry.
		{name: "codex", provider: "openai", api: "openai", modelID: "mock-model", keyName: "OPENAI_API_KEY", openAIBase: true},
		{name: "pi", provider: "anthropic", api: "anthropic", modelID: "claude-test", keyName: "ANTHROPIC_API_KEY"},
	}
}

func (h harnessCase) baseURL(llm string) string {
	if h.openAIBase {
		return llm + "/v1"
	}
	return llm
}

// request is the POST /run body for a "Say hello" turn on this agent. It
// leaves tools out, so the run has the default builtin grants.
func (h harnessCase) request(llm string) *runnel.RunRequest {
	return &runnel.RunRequest{
		Harness:  h.name,
		Model:    h.provider + "/" + h.modelID,
		Endpoint: &runnel.Endpoint{BaseURL: h.baseURL(llm)},
		Secrets:  map[string]string{h.keyName: modelKey},
		Messages: []runnel.Message{runnel.UserText(helloPrompt)},
	}
}

// model is the same model as runnel hands it to the agent's recipe.
func (h harnessCase) model(llm string) agents.Model {
	return agents.Model{Provider: h.provider, API: h.api, ID: h.modelID, BaseURL: h.baseURL(llm), APIKey: modelKey}
}

// firstTextContestant runs one "Say hello" turn on one agent and times it.
type firstTextContestant interface {
	name() string
	turn(ctx context.Context) (turnTimes, error)
}

// turnTimes is one timed turn. Times run from just before the agent is
// started (alone) or the request is sent (through runnel).
type turnTimes struct {
	FirstText time.Duration `json:"firstTextNs"`
	// End is the prompt's answer (alone) or the result record (through
	// runnel, which writes it once the agent is gone).
	End time.Duration `json:"endNs"`
	// Gone (alone only) is when the agent's whole process tree has been
	// reaped, ended the way runnel ends it.
	Gone time.Duration `json:"goneNs,omitempty"`
	// Setup (alone only) is the launch recipe's own time (writing the
	// agent's HOME), before the clock starts.
	Setup time.Duration `json:"setupNs,omitempty"`
	// CPU: alone, Children is the agent's process tree; through runnel,
	// Self is runnel's own and Children its reaped agent's tree.
	CPU benchkit.CPU `json:"cpu"`
}

// runFirstText runs the first-text benchmark on every installed agent of
// cfg.harnesses.
func runFirstText(ctx context.Context, cfg config, tmp string) ([]firstTextRow, error) {
	cases, reg, err := firstTextCases(cfg, tmp)
	if err != nil || len(cases) == 0 {
		return nil, err
	}

	rp, err := newReaper()
	if err != nil {
		return nil, err
	}
	llm, err := benchkit.ServeModel(helloScript()) // records no request
	if err != nil {
		return nil, err
	}
	defer llm.Close()
	// The local sandbox, as this benchmark has always measured: the
	// isolated one has a benchmark of its own (isolated.go).
	srv, err := startAgentRunnel(ctx, cfg.runnelBin, cfg.agentsDir, tmp, []string{"RUNNEL_ALLOW_LOCAL_SANDBOX=true"}, false)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	rp.keep(srv.PID())

	fmt.Printf("first text: %d timed turns per agent and contestant after one untimed, alternating\n", cfg.rounds)
	var rows []firstTextRow
	for _, h := range cases {
		req := h.request(llm.URL)
		req.Sandbox = "local"
		served := newServedTurn(srv, req)
		defer served.client.CloseIdleConnections()
		cs := []firstTextContestant{&alone{h: h, reg: reg, llm: llm.URL, tmp: tmp, reaper: rp}, served}
		res, err := alternate(ctx, h.name, cfg.rounds, cs)
		if err != nil {
			return nil, err
		}
		row := newFirstTextRow(h.name, res[cs[0].name()], res[cs[1].name()])
		row.print(os.Stdout)
		rows = append(rows, row)
	}
	return rows, nil
}

// alternate runs one untimed turn of each contestant, then rounds timed
// turns of each, the order rotating every round, and returns the times by
// contestant name.
func alternate(ctx context.Context, agent string, rounds int, cs []firstTextContestant) (map[string][]turnTimes, error) {
	res := map[string][]turnTimes{}
	for _, c := range cs {
		if _, err := c.turn(ctx); err != nil {
			return nil, fmt.Errorf("%s, %s, warm-up: %w", agent, c.name(), err)
		}
	}
	for round := range rounds {
		for i := range cs {
			c := cs[(i+round)%len(cs)]
			t, err := c.turn(ctx)
			if err != nil {
				return nil, fmt.Errorf("%s, %s, round %d: %w", agent, c.name(), round+1, err)
			}
			res[c.name()] = append(res[c.name()], t)
		}
	}
	return res, nil
}

// firstTextCases are the installed agents of cfg.harnesses, with the
// registry that found them; none (and a note) without an agents
// directory. Real agents start only in a loopback-only namespace.
func firstTextCases(cfg config, tmp string) ([]harnessCase, *agents.Registry, error) {
	if cfg.requireNetns {
		if err := checkLoopbackOnly(); err != nil {
			return nil, nil, err
		}
	}
	if cfg.agentsDir == "" {
		fmt.Println("no agents directory (-agents, or RUNNEL_AGENTS_DIR); the agent benchmarks are skipped")
		return nil, nil, nil
	}
	reg := agents.NewRegistry(agents.Options{Dir: cfg.agentsDir, HomeRoot: filepath.Join(tmp, "alone-homes")})
	cases, versions, err := installedCases(reg, cfg.harnesses)
	if err != nil {
		return nil, nil, err
	}
	if len(cases) == 0 {
		fmt.Println("none of the agents is installed; the agent benchmarks are skipped")
		return nil, nil, nil
	}
	fmt.Printf("agents: %s\n", strings.Join(versions, ", "))
	return cases, reg, nil
}

// installedCases are the agents of names this benchmark can script that
// are installed, with their versions; a missing one is skipped with a
// note, an unknown one is an error.
func installedCases(reg *agents.Registry, names []string) ([]harnessCase, []string, error) {
	var cases []harnessCase
	var versions []string
	for _, want := range names {
		i := slices.IndexFunc(harnessCases(), func(c harnessCase) bool { return c.name == agents.Canonical(want) })
		if i < 0 {
			return nil, nil, fmt.Errorf("-harness %q: this benchmark knows claude, codex and pi", want)
		}
		hc := harnessCases()[i]
		a, err := reg.Resolve(hc.name)
		if err != nil {
			fmt.Printf("first text: %s skipped: %v\n", hc.name, err)
			continue
		}
		cases = append(cases, hc)
		versions = append(versions, hc.name+" "+a.Version())
	}
	return cases, versions, nil
}

// startAgentRunnel starts `runnel serve` as internal/agenttest does: the
// agents directory, a workspace root and a TMPDIR of its own (agent
// HOMEs are made under it), a token, and the caller's PATH so that it
// finds the same node as this program. extra adds settings.
func startAgentRunnel(ctx context.Context, bin, agentsDir, tmp string, extra []string, inCgroup bool) (*benchkit.Runnel, error) {
	dir, err := os.MkdirTemp(tmp, "runnel-")
	if err != nil {
		return nil, err
	}
	ws, rtmp := filepath.Join(dir, "workspaces"), filepath.Join(dir, "tmp")
	for _, d := range []string{ws, rtmp} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, err
		}
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "RUNNEL_TOKEN=" + token, "RUNNEL_AGENTS_DIR=" + agentsDir,
		"RUNNEL_WORKSPACE_ROOT=" + ws, "TMPDIR=" + rtmp, "RUNNEL_RUN_TIMEOUT=3m"}
	if inCgroup {
		return benchkit.StartRunnelInCgroup(ctx, bin, append(env, extra...))
	}
	return benchkit.StartRunnel(ctx, bin, append(env, extra...))
}
