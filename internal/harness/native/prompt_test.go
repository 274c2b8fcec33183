package native

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel"
)

func TestBuildPrompt(t *testing.T) {
	sys := runnel.Message{Role: runnel.RoleSystem, Content: []runnel.Block{{Type: runnel.BlockText, Text: "From history."}}}
	user := runnel.UserText("hi")
	tests := []struct {
		name string
		req  runnel.RunRequest
		want Prompt
	}{
		{"default", runnel.RunRequest{Messages: []runnel.Message{user}},
			Prompt{System: DefaultSystemPrompt, Messages: []runnel.Message{user}}},
		{"everything in order", runnel.RunRequest{
			SystemPrompt: "You are Pi.", AppendSystemPrompt: "Be terse.", AgentsMd: "Use tabs.\n",
			Messages: []runnel.Message{sys, user},
		}, Prompt{
			System:   "You are Pi.\n\nFrom history.\n\nBe terse.\n\n# AGENTS.md\n\nThe project's AGENTS.md file says:\n\nUse tabs.",
			Messages: []runnel.Message{user},
		}},
		{"blank system prompt falls back", runnel.RunRequest{SystemPrompt: "  ", AppendSystemPrompt: "More."},
			Prompt{System: DefaultSystemPrompt + "\n\nMore."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, BuildPrompt(&tt.req)); diff != "" {
				t.Errorf("BuildPrompt (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLatestUserText(t *testing.T) {
	image := runnel.Message{Role: runnel.RoleUser, Content: []runnel.Block{{Type: runnel.BlockImage, Data: "x"}}}
	tests := []struct {
		name   string
		msgs   []runnel.Message
		want   string
		wantOK bool
	}{
		{"none", nil, "", false},
		{"only assistant", []runnel.Message{{Role: runnel.RoleAssistant, Content: []runnel.Block{{Type: runnel.BlockText, Text: "x"}}}}, "", false},
		{"blank user", []runnel.Message{runnel.UserText("  ")}, "", false},
		{"latest with text wins", []runnel.Message{runnel.UserText("first"), runnel.UserText("second"), image}, "second", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := LatestUserText(tt.msgs)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("LatestUserText = %q, %v; want %q, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
