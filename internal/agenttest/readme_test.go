package agenttest

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/exampletest"
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
	callback := exampletest.WeatherCallback(t)
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
