package server

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel"
)

func TestCollectorCoalescesText(t *testing.T) {
	ev := func(typ runnel.EventType, id, delta string) runnel.Event {
		return runnel.Event{Type: typ, ID: id, Delta: delta}
	}
	done := runnel.Event{Type: runnel.EventDone, StopReason: runnel.StopEndTurn}
	call := runnel.Event{Type: runnel.EventToolCall, ID: "c1", Name: "read"}
	tests := []struct {
		name string
		in   []runnel.Event
		want []runnel.Event
	}{
		{"one message", []runnel.Event{
			ev(runnel.EventMessageStart, "m1", ""), ev(runnel.EventMessageDelta, "m1", "Hel"),
			ev(runnel.EventMessageDelta, "m1", "lo"), ev(runnel.EventMessageEnd, "m1", ""), done},
			[]runnel.Event{{Type: runnel.EventMessage, ID: "m1", Text: "Hello"}, done}},
		{"thought then message then tool call", []runnel.Event{
			ev(runnel.EventThoughtStart, "t1", ""), ev(runnel.EventThoughtDelta, "t1", "think"), ev(runnel.EventThoughtEnd, "t1", ""),
			ev(runnel.EventMessageStart, "m1", ""), ev(runnel.EventMessageDelta, "m1", "ok"), ev(runnel.EventMessageEnd, "m1", ""),
			call},
			[]runnel.Event{{Type: runnel.EventThought, ID: "t1", Text: "think"}, {Type: runnel.EventMessage, ID: "m1", Text: "ok"}, call}},
		{"interleaved keep their start order", []runnel.Event{
			ev(runnel.EventThoughtStart, "x", ""), ev(runnel.EventMessageStart, "x", ""),
			ev(runnel.EventMessageDelta, "x", "said"), ev(runnel.EventThoughtDelta, "x", "thought"),
			call, ev(runnel.EventMessageDelta, "x", "!"), ev(runnel.EventMessageEnd, "x", ""), ev(runnel.EventThoughtEnd, "x", "")},
			[]runnel.Event{{Type: runnel.EventThought, ID: "x", Text: "thought"}, {Type: runnel.EventMessage, ID: "x", Text: "said!"}, call}},
		{"empty message dropped", []runnel.Event{ev(runnel.EventMessageStart, "m1", ""), ev(runnel.EventMessageEnd, "m1", ""), done},
			[]runnel.Event{done}},
		{"delta without start", []runnel.Event{ev(runnel.EventMessageDelta, "m1", "a"), ev(runnel.EventMessageDelta, "m1", "b")},
			[]runnel.Event{{Type: runnel.EventMessage, ID: "m1", Text: "ab"}}},
		{"same id reused after end", []runnel.Event{
			ev(runnel.EventMessageDelta, "m", "one"), ev(runnel.EventMessageEnd, "m", ""),
			ev(runnel.EventMessageDelta, "m", "two"), ev(runnel.EventMessageEnd, "m", "")},
			[]runnel.Event{{Type: runnel.EventMessage, ID: "m", Text: "one"}, {Type: runnel.EventMessage, ID: "m", Text: "two"}}},
		{"stray end ignored", []runnel.Event{ev(runnel.EventMessageEnd, "m", ""), done}, []runnel.Event{done}},
		{"nothing", nil, []runnel.Event{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Collector
			for _, e := range tt.in {
				c.Emit(e)
			}
			if diff := cmp.Diff(tt.want, c.Events()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}
