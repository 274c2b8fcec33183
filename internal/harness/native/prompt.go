package native

import (
	"strings"

	"github.com/runnel/runnel"
)

// DefaultSystemPrompt is used when a request sets no systemPrompt.
const DefaultSystemPrompt = "You are a helpful assistant. Use the available tools when they help with the user's request, and answer concisely."

// Prompt is the model's view of a request: the whole system prompt and the
// conversation without system-role messages.
type Prompt struct {
	System   string
	Messages []runnel.Message
}

// BuildPrompt assembles the system prompt from the request's systemPrompt
// (or DefaultSystemPrompt), the text of any system-role messages,
// appendSystemPrompt and agentsMd (as an AGENTS.md section), in that order.
// System-role messages are folded in there because not every model API
// accepts them inside the conversation.
func BuildPrompt(req *runnel.RunRequest) Prompt {
	var parts []string
	add := func(s string) {
		if s = strings.TrimSpace(s); s != "" {
			parts = append(parts, s)
		}
	}
	if strings.TrimSpace(req.SystemPrompt) != "" {
		add(req.SystemPrompt)
	} else {
		add(DefaultSystemPrompt)
	}
	var conv []runnel.Message
	for _, m := range req.Messages {
		if m.Role == runnel.RoleSystem {
			add(m.Text())
			continue
		}
		conv = append(conv, m)
	}
	add(req.AppendSystemPrompt)
	if strings.TrimSpace(req.AgentsMd) != "" {
		add("# AGENTS.md\n\nThe project's AGENTS.md file says:\n\n" + strings.TrimSpace(req.AgentsMd))
	}
	return Prompt{System: strings.Join(parts, "\n\n"), Messages: conv}
}

// LatestUserText returns the text of the latest user message that has
// text: the turn's prompt. ok is false when no message has any.
func LatestUserText(msgs []runnel.Message) (text string, ok bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != runnel.RoleUser {
			continue
		}
		if t := msgs[i].Text(); strings.TrimSpace(t) != "" {
			return t, true
		}
	}
	return "", false
}
