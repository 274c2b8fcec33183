package acp

import (
	"fmt"
	"strings"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/sandbox"
)

// transcript is the messages a turn adds, built from what it emits:
// assistant messages hold text and tool calls, tool messages the results,
// alternating as the calls were made and answered, so a replay of them
// reads as a conversation every model API accepts.
type transcript struct {
	msgs  []runnel.Message
	usage runnel.Usage
	stop  string
}

func (t *transcript) last(role runnel.Role) *runnel.Message {
	if n := len(t.msgs); n > 0 && t.msgs[n-1].Role == role {
		return &t.msgs[n-1]
	}
	t.msgs = append(t.msgs, runnel.Message{Role: role})
	return &t.msgs[len(t.msgs)-1]
}

func (t *transcript) text(s string) {
	m := t.last(runnel.RoleAssistant)
	if n := len(m.Content); n > 0 && m.Content[n-1].Type == runnel.BlockText {
		m.Content[n-1].Text += s
		return
	}
	m.Content = append(m.Content, runnel.Block{Type: runnel.BlockText, Text: s})
}

func (t *transcript) call(b runnel.Block) {
	m := t.last(runnel.RoleAssistant)
	m.Content = append(m.Content, b)
}

func (t *transcript) result(b runnel.Block) {
	m := t.last(runnel.RoleTool)
	m.Content = append(m.Content, b)
}

// textPart turns text chunks into message and thought events: each run of
// one kind is a part with its own id, closed when another kind or a tool
// call comes.
type textPart struct {
	open   runnel.EventType // the end event of the open part, "" when none
	id     string
	counts map[string]int
}

func (p *textPart) delta(s *session, prefix string, start, delta, end runnel.EventType, text string) {
	if p.open != end {
		p.close(s)
		if p.counts == nil {
			p.counts = map[string]int{}
		}
		p.counts[prefix]++
		p.id = fmt.Sprintf("%s_%d", prefix, p.counts[prefix])
		p.open = end
		s.emitLocked(runnel.Event{Type: start, ID: p.id})
	}
	s.emitLocked(runnel.Event{Type: delta, ID: p.id, Delta: text})
}

func (p *textPart) close(s *session) {
	if p.open != "" {
		s.emitLocked(runnel.Event{Type: p.open, ID: p.id})
		p.open = ""
	}
}

// tail keeps the last bytes an agent wrote to stderr, for the sentence
// that explains its failure.
type tail struct{ *sandbox.Tail }

func newTail(max int) *tail { return &tail{sandbox.NewTail(max)} }

// sentence is the last lines of stderr as a sentence to append to an
// error, or "" when the agent printed nothing.
func (t *tail) sentence() string {
	s := strings.TrimSpace(strings.ToValidUTF8(t.String(), "?"))
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return " Its last output: " + clip(strings.Join(lines, " | "), 600)
}
