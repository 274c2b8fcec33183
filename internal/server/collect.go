package server

import (
	"strings"
	"sync"

	"github.com/runnel/runnel"
)

// Collector is a runnel.Sink that keeps a run's events for a one-shot
// result, with text coalesced (DESIGN §3.4): a message_start … deltas …
// message_end sequence becomes one `message {text}` event at the place the
// message started, and likewise thoughts become `thought {text}`. Messages
// and thoughts that end up empty are dropped; every other event is kept as
// it came. The zero value is ready to use, and it is safe for concurrent
// use.
type Collector struct {
	mu     sync.Mutex
	events []runnel.Event
	open   map[textKey]int      // the coalesced event of each open message or thought
	texts  map[int]*textBuilder // text of the coalesced event at that index
}

type textKey struct {
	typ runnel.EventType // EventMessage or EventThought
	id  string
}

type textBuilder struct{ strings.Builder }

// Emit records e.
func (c *Collector) Emit(e runnel.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch e.Type {
	case runnel.EventMessageStart:
		c.begin(textKey{runnel.EventMessage, e.ID})
	case runnel.EventThoughtStart:
		c.begin(textKey{runnel.EventThought, e.ID})
	case runnel.EventMessageDelta:
		c.texts[c.begin(textKey{runnel.EventMessage, e.ID})].WriteString(e.Delta)
	case runnel.EventThoughtDelta:
		c.texts[c.begin(textKey{runnel.EventThought, e.ID})].WriteString(e.Delta)
	case runnel.EventMessageEnd:
		delete(c.open, textKey{runnel.EventMessage, e.ID})
	case runnel.EventThoughtEnd:
		delete(c.open, textKey{runnel.EventThought, e.ID})
	default:
		c.events = append(c.events, e)
	}
}

// begin returns the index of k's coalesced event, opening it if needed. A
// delta without a start opens one too, so no text is lost to a sloppy
// emitter.
func (c *Collector) begin(k textKey) int {
	if i, ok := c.open[k]; ok {
		return i
	}
	if c.open == nil {
		c.open = map[textKey]int{}
		c.texts = map[int]*textBuilder{}
	}
	i := len(c.events)
	c.events = append(c.events, runnel.Event{Type: k.typ, ID: k.id})
	c.open[k] = i
	c.texts[i] = &textBuilder{}
	return i
}

// Events returns the coalesced events so far.
func (c *Collector) Events() []runnel.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]runnel.Event, 0, len(c.events))
	for i, e := range c.events {
		if tb, ok := c.texts[i]; ok {
			if e.Text = tb.String(); e.Text == "" {
				continue
			}
		}
		out = append(out, e)
	}
	return out
}
