package main

import (
	"os"
	"strings"
	"testing"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/exampletest"
	"github.com/runnel/runnel/internal/llmtest"
)

// TestReadmeWalkthrough runs the README's five-minute walk-through with
// the files it names: the mockllm example script, the weather callback
// program (built and started as a real process) and examples/weather.json,
// with only the loopback ports changed.
func TestReadmeWalkthrough(t *testing.T) {
	script, err := llmtest.LoadScript("../../examples/mockllm/tool-call.json")
	if err != nil {
		t.Fatal(err)
	}
	llm := llmtest.NewServer(script)
	defer llm.Close()
	callbackURL := exampletest.WeatherCallback(t)

	raw, err := os.ReadFile("../../examples/weather.json")
	if err != nil {
		t.Fatal(err)
	}
	body := strings.NewReplacer(
		"http://127.0.0.1:8790", llm.URL,
		"http://127.0.0.1:8791", callbackURL,
	).Replace(string(raw))

	url, _, stop := startDaemon(t, nil, nil)
	defer stop()
	events, result := postStream(t, url, "", []byte(body))
	var call, res *runnel.Event
	for i := range events {
		switch events[i].Type {
		case runnel.EventToolCall:
			call = &events[i]
		case runnel.EventToolResult:
			res = &events[i]
		}
	}
	if call == nil || call.Name != "get_weather" || string(call.Input) != `{"city":"Paris"}` {
		t.Errorf("tool_call event %+v, want get_weather {\"city\":\"Paris\"}", call)
	}
	if res == nil || string(res.Output) != `"18°C and sunny in Paris"` || res.IsError {
		t.Errorf("tool_result event %+v", res)
	}
	if result.Status != runnel.StatusCompleted || result.Output != "The weather in Paris: 18°C and sunny in Paris" {
		t.Errorf("result %+v", result)
	}
}
