// Package redact removes known secret values from everything a run shows
// the outside world: events, results and log records.
//
// A Redactor is built once per run from the values the request marks as
// secret, and knows the forms those values take in transit:
//
//	r := redact.New(req.Secrets["OPENAI_API_KEY"], req.ToolCallback.Authorization)
//	sink = r.Sink(sink)          // streamed events
//	r.Result(res)                // the final result, in place
//	logger = slog.New(r.Handler(logger.Handler()))
package redact

import (
	"bytes"
	"encoding/json"
	"net/url"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/runnel/runnel"
)

// Marker replaces every occurrence of a secret.
const Marker = "[REDACTED]"

// minLen is the shortest value treated as a secret. Shorter values would
// shred ordinary text ("a", "ok") while protecting nothing worth having.
const minLen = 4

// Redactor replaces known secrets. It is safe for concurrent use; the Sink
// it returns is not (a run emits from one goroutine at a time).
type Redactor struct {
	needles  []string // longest first, so a whole credential wins over its parts
	replacer *strings.Replacer
	maxLen   int
}

// New returns a Redactor for the given secret values. Besides each value
// it catches the URL-encoded and JSON-escaped forms, the password of a URL
// or DSN ("postgres://user:pass@host"), and the token of an authorization
// value with a scheme ("Bearer tok", "ApiKey tok").
func New(values ...string) *Redactor {
	set := map[string]bool{}
	add := func(s string) {
		if len(s) >= minLen {
			set[s] = true
		}
	}
	for _, v := range values {
		for _, base := range derived(v) {
			add(base)
			add(url.QueryEscape(base))
			add(url.PathEscape(base))
			if esc, err := json.Marshal(base); err == nil {
				add(string(esc[1 : len(esc)-1]))
			}
		}
	}
	r := &Redactor{}
	for s := range set {
		r.needles = append(r.needles, s)
		r.maxLen = max(r.maxLen, len(s))
	}
	sort.Slice(r.needles, func(i, j int) bool {
		if len(r.needles[i]) != len(r.needles[j]) {
			return len(r.needles[i]) > len(r.needles[j])
		}
		return r.needles[i] < r.needles[j]
	})
	pairs := make([]string, 0, 2*len(r.needles))
	for _, n := range r.needles {
		pairs = append(pairs, n, Marker)
	}
	r.replacer = strings.NewReplacer(pairs...)
	return r
}

// derived returns v and the secret parts hidden inside it.
func derived(v string) []string {
	v = strings.TrimSpace(v)
	out := []string{v}
	if u, err := url.Parse(v); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok {
			out = append(out, p)
		}
	}
	if scheme, token, ok := strings.Cut(v, " "); ok && !strings.ContainsAny(scheme, "/:@") {
		out = append(out, strings.TrimSpace(token))
	}
	return out
}

// Empty reports whether r knows no secrets.
func (r *Redactor) Empty() bool { return r == nil || len(r.needles) == 0 }

// String returns s with every secret replaced by Marker.
func (r *Redactor) String(s string) string {
	if r.Empty() || s == "" {
		return s
	}
	return r.replacer.Replace(s)
}

// Bytes returns b with every secret replaced by Marker. JSON stays valid:
// the marker needs no escaping and replaces whole escaped forms.
func (r *Redactor) Bytes(b []byte) []byte {
	if r.Empty() || len(b) == 0 {
		return b
	}
	s := string(b)
	if out := r.replacer.Replace(s); out != s {
		return []byte(out)
	}
	return b
}

func (r *Redactor) raw(b json.RawMessage) json.RawMessage { return r.Bytes(b) }

// Event returns e with every text and JSON field redacted.
func (r *Redactor) Event(e runnel.Event) runnel.Event {
	if r.Empty() {
		return e
	}
	e.Delta, e.Text, e.Name, e.Message = r.String(e.Delta), r.String(e.Text), r.String(e.Name), r.String(e.Message)
	e.Input, e.Output, e.Render = r.raw(e.Input), r.raw(e.Output), r.raw(e.Render)
	if e.Interaction != nil {
		it := r.interaction(*e.Interaction)
		e.Interaction = &it
	}
	return e
}

func (r *Redactor) interaction(it runnel.Interaction) runnel.Interaction {
	it.ToolName = r.String(it.ToolName)
	it.Input, it.Render = r.raw(it.Input), r.raw(it.Render)
	return it
}

// Message returns m with every block redacted.
func (r *Redactor) Message(m runnel.Message) runnel.Message {
	if r.Empty() {
		return m
	}
	blocks := make([]runnel.Block, len(m.Content))
	for i, b := range m.Content {
		b.Text, b.Data, b.URI, b.ToolName = r.String(b.Text), r.String(b.Data), r.String(b.URI), r.String(b.ToolName)
		b.Input, b.Output = r.raw(b.Input), r.raw(b.Output)
		blocks[i] = b
	}
	m.Content = blocks
	return m
}

// Result redacts res in place.
func (r *Redactor) Result(res *runnel.Result) {
	if r.Empty() || res == nil {
		return
	}
	res.Output, res.Error = r.String(res.Output), r.String(res.Error)
	for i := range res.Messages {
		res.Messages[i] = r.Message(res.Messages[i])
	}
	for i := range res.Events {
		res.Events[i] = r.Event(res.Events[i])
	}
	for i := range res.Interactions {
		res.Interactions[i] = r.interaction(res.Interactions[i])
	}
	for i := range res.Notices {
		res.Notices[i] = r.String(res.Notices[i])
	}
}

// Sink returns a Sink that redacts every event before passing it to next.
// Text deltas are held back just long enough that a secret split across
// two deltas is still caught: at most the longest secret's length minus
// one byte waits for the next delta or the part's end event.
func (r *Redactor) Sink(next runnel.Sink) runnel.Sink {
	if r.Empty() {
		return next
	}
	return &sink{r: r, next: next, pending: map[string]string{}}
}

type sink struct {
	r       *Redactor
	next    runnel.Sink
	pending map[string]string // per message/thought id, text not yet passed on
}

func (s *sink) Emit(e runnel.Event) {
	switch e.Type {
	case runnel.EventMessageDelta, runnel.EventThoughtDelta:
		buf := s.pending[e.ID] + e.Delta
		cut := s.r.safeCut(buf)
		s.pending[e.ID] = buf[cut:]
		if cut == 0 {
			return
		}
		e.Delta = buf[:cut]
	case runnel.EventMessageEnd, runnel.EventThoughtEnd:
		if rest := s.pending[e.ID]; rest != "" {
			delta := runnel.EventMessageDelta
			if e.Type == runnel.EventThoughtEnd {
				delta = runnel.EventThoughtDelta
			}
			s.next.Emit(runnel.Event{Type: delta, ID: e.ID, Delta: s.r.String(rest)})
		}
		delete(s.pending, e.ID)
	}
	s.next.Emit(s.r.Event(e))
}

// safeCut returns how much of buf can be redacted and passed on now: all of
// it but a tail that could be the start of a secret, extended over any
// secret that straddles the cut (such a secret is whole inside buf).
func (r *Redactor) safeCut(buf string) int {
	cut := len(buf) - (r.maxLen - 1)
	if cut <= 0 {
		return 0
	}
	for moved := true; moved; {
		moved = false
		for _, n := range r.needles {
			for from := 0; from < cut; {
				i := strings.Index(buf[from:], n)
				if i < 0 || from+i >= cut {
					break
				}
				if end := from + i + len(n); end > cut {
					cut, moved = end, true
				}
				from += i + 1
			}
		}
	}
	for cut > 0 && cut < len(buf) && !utf8.RuneStart(buf[cut]) {
		cut--
	}
	return cut
}

// Contains reports whether b holds any secret; tests use it to prove
// nothing leaked without printing the secret.
func (r *Redactor) Contains(b []byte) bool {
	for _, n := range r.needles {
		if bytes.Contains(b, []byte(n)) {
			return true
		}
	}
	return false
}
