package agenttest

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/llmtest"
)

// The README's walk-through with a coding agent, with the files it names:
// examples/mockllm/agents.json as the model's script, the weather callback
// program as the platform, and examples/claude-weather.json changed the
// way the README says for each agent; only the loopback ports differ.
func TestReadmeAgentWalkthrough(t *testing.T) {
	script, err := llmtest.LoadScript("../../examples/mockllm/agents.json")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("../../examples/claude-weather.json")
	if err != nil {
		t.Fatal(err)
	}
	callback := startWeatherCallback(t)
	for _, ac := range agentCases() {
		t.Run(ac.harness, func(t *testing.T) {
			dir := agentsDir(t, ac.harness)
			llm := llmtest.NewServer(script)
			defer llm.Close()
			var req map[string]any
			body := strings.NewReplacer("http://127.0.0.1:8790", llm.URL, "http://127.0.0.1:8791", callback).Replace(string(raw))
			if err := json.Unmarshal([]byte(body), &req); err != nil {
				t.Fatal(err)
			}
			req["harness"] = ac.harness
			switch ac.harness {
			case "codex":
				req["model"], req["endpoint"] = "openai/mock-model", map[string]any{"baseUrl": llm.URL + "/v1"}
				req["secrets"] = map[string]any{"OPENAI_API_KEY": "mock-key"}
			case "gemini":
				req["model"], req["secrets"] = "gemini/gemini-2.5-pro", map[string]any{"GEMINI_API_KEY": "mock-key"}
			}
			p := serve(t, dir)
			defer p.checkClean(t, dir)
			res, events := p.run(t, req)
			if res.Status != runnel.StatusCompleted || !strings.HasPrefix(res.Output, "The weather in Paris: ") ||
				!strings.Contains(res.Output, "18°C and sunny in Paris") {
				t.Fatalf("result %+v", res)
			}
			checkToolEvents(t, events, "get_weather", `{"city":"Paris"}`)
		})
	}
}

// startWeatherCallback builds examples/weather-callback and runs it on a
// free loopback port until the test ends; it returns its base URL.
func startWeatherCallback(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "weather-callback")
	if out, err := exec.Command("go", "build", "-o", bin, "../../examples/weather-callback").CombinedOutput(); err != nil {
		t.Fatalf("building the weather callback: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--addr", addr)
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return "http://" + addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("the weather callback did not listen on %s", addr)
		}
	}
}
