package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseScenario(t *testing.T) {
	tests := []struct {
		name, json, wantErr string
	}{
		{"empty is a zero scenario", ``, ""},
		{"misspelt field", `{"turn": []}`, `unknown field "turn"`},
		{"misspelt step field", `{"turns": [{"steps": [{"txt": "x"}]}]}`, `unknown field "txt"`},
		{"two fields in a step", `{"turns": [{"steps": [{"text": "a", "thought": "b"}]}]}`, "exactly one field, this one sets 2"},
		{"empty step", `{"turns": [{"steps": [{}]}]}`, "this one sets 0"},
		{"nested branch checked", `{"turns": [{"steps": [{"permission": {"onAllow": [{}]}}]}]}`, "onAllow: steps[0]"},
		{"bad duration", `{"turns": [{"steps": [{"sleep": "soon"}]}]}`, "invalid duration"},
		{"duration as number", `{"initialize": {"delay": 5}}`, `like "250ms"`},
		{"id style", `{"idStyle": "uuid"}`, "idStyle"},
		{"tool call not an object", `{"turns": [{"steps": [{"toolCall": [1]}]}]}`, "must be objects"},
		{"options not a list", `{"turns": [{"steps": [{"permission": {"options": {}}}]}]}`, "permission options"},
		{"mcpCall without a tool", `{"turns": [{"steps": [{"mcpCall": {"server": "runnel"}}]}]}`, "server and tool"},
		{"notify with both", `{"turns": [{"steps": [{"notify": {"method": "m", "update": {}}}]}]}`, "not both"},
		{"flood of nothing", `{"turns": [{"steps": [{"flood": {}}]}]}`, "bytes > 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseScenario([]byte(tt.json))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestTestdataScenariosParse(t *testing.T) {
	files, err := filepath.Glob("testdata/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata scenarios: %v", err)
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := parseScenario(data); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
