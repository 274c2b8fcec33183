package redact

import "github.com/runnel/runnel"

// Sink returns a Sink that redacts every event before passing it to next.
//
// Text deltas are held back just long enough that a secret split across
// deltas is still caught: only a tail that could begin a secret (in any
// spelling) or end in an unfinished escape waits for the next delta. When
// a part ends (its end event, or done or error for every part still open),
// what waited is passed on, redacted, and a tail of minLen bytes or more
// that is the start of a secret is redacted too: the stream stopped
// mid-secret. The deltas joined are the part's text as Result shows it.
func (r *Redactor) Sink(next runnel.Sink) runnel.Sink {
	if r.Empty() {
		return next
	}
	return &sink{r: r, next: next, parts: map[partKey]*part{}}
}

type sink struct {
	r     *Redactor
	next  runnel.Sink
	parts map[partKey]*part
	order []partKey // the open parts, first opened first, for done and error
}

// partKey names a message or thought; the two may share an id.
type partKey struct {
	delta runnel.EventType
	id    string
}

// part is what waits of one message or thought.
type part struct {
	held    string
	covered int // how much of held is a secret whose marker was passed on
}

func (s *sink) Emit(e runnel.Event) {
	switch e.Type {
	case runnel.EventMessageDelta, runnel.EventThoughtDelta:
		s.delta(e)
		return
	case runnel.EventMessageEnd:
		s.flush(partKey{runnel.EventMessageDelta, e.ID})
	case runnel.EventThoughtEnd:
		s.flush(partKey{runnel.EventThoughtDelta, e.ID})
	case runnel.EventDone, runnel.EventError:
		for len(s.order) > 0 {
			s.flush(s.order[0])
		}
	}
	s.next.Emit(s.r.Event(e))
}

func (s *sink) delta(e runnel.Event) {
	key := partKey{e.Type, e.ID}
	p := s.parts[key]
	if p == nil {
		p = &part{}
		s.parts[key] = p
		s.order = append(s.order, key)
	}
	shown, rest, covered := s.r.cut(p.held+e.Delta, p.covered, false)
	p.held, p.covered = rest, covered
	s.pass(key, shown)
}

// flush passes on what waits of a part, which ends here.
func (s *sink) flush(key partKey) {
	p := s.parts[key]
	if p == nil {
		return
	}
	delete(s.parts, key)
	for i, k := range s.order {
		if k == key {
			s.order = append(s.order[:i], s.order[i+1:]...)
			break
		}
	}
	shown, _, _ := s.r.cut(p.held, p.covered, true)
	s.pass(key, shown)
}

func (s *sink) pass(key partKey, text string) {
	if text == "" {
		return
	}
	s.next.Emit(runnel.Event{Type: key.delta, ID: s.r.String(key.id), Delta: text})
}
