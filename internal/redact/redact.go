// Package redact removes known secret values from everything a run shows
// the outside world: events, results and log records.
//
// A Redactor is built once per run from the values the request marks as
// secret, and knows the forms those values take in transit:
//
//	r := redact.New(req.Secrets["OPENAI_API_KEY"], req.ToolCallback.Authorization)
//	sink = r.Sink(sink)          // streamed events
//	r.Result(res)                // the final result, in place
//	out = r.JSON(out)            // a JSON value, still valid JSON
//	logger = slog.New(r.Handler(logger.Handler()))
//
// The files split by concern: matcher.go finds every secret at once,
// reading.go reads text the ways a reader can undo its escapes, span.go
// turns what was found into replacements (whole or streamed), json.go
// keeps JSON valid, and sink.go, values.go and log.go apply all that to a
// run's events, results and logs.
package redact

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
)

// Marker replaces every occurrence of a secret.
const Marker = "[REDACTED]"

// minLen is the shortest value treated as a secret. Shorter values would
// shred ordinary text ("a", "ok") while protecting nothing worth having.
const minLen = 4

// Redactor replaces known secrets. It is safe for concurrent use; the Sink
// it returns is not (a run emits from one goroutine at a time).
//
// All the secrets are looked for at once, by one automaton built in New:
// redacting a text costs the same for one secret as for 100,000.
type Redactor struct {
	m       *matcher
	needles int
}

// New returns a Redactor for the given secret values. Besides each value
// it catches the password of a URL or DSN ("postgres://user:pass@host")
// and the token of an authorization value with a scheme ("Bearer tok",
// "ApiKey tok"), each in every spelling a reader can undo: URL-encoded,
// percent-encoded, and JSON-escaped (any of `\/`, `\uXXXX`, surrogate
// pairs), up to three levels deep.
func New(values ...string) *Redactor {
	set := map[string]struct{}{}
	for _, v := range values {
		for _, base := range derived(v) {
			if len(base) < minLen {
				continue
			}
			for _, f := range spellings(base) {
				set[f] = struct{}{}
			}
		}
	}
	if len(set) == 0 {
		return &Redactor{}
	}
	needles := make([]string, 0, len(set))
	for s := range set {
		needles = append(needles, s)
	}
	slices.Sort(needles)
	return &Redactor{m: newMatcher(needles), needles: len(needles)}
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

// spellings are the needles for one secret. Readings undo escapes where
// they are well formed; these catch the canonical encodings even where a
// reading starts out of step (after a stray backslash).
func spellings(s string) []string {
	out := []string{s, url.QueryEscape(s), url.PathEscape(s)}
	if esc, err := json.Marshal(s); err == nil {
		out = append(out, string(esc[1:len(esc)-1]))
	}
	return out
}

// Empty reports whether r knows no secrets.
func (r *Redactor) Empty() bool { return r == nil || r.needles == 0 }

// String returns s with every secret replaced by Marker. Secrets that
// overlap are replaced by one marker. A marker already in s is left as it
// is: no secret is found across one (not even one such as "ACTED"), so
// redacting twice changes nothing more.
func (r *Redactor) String(s string) string {
	if r.Empty() || s == "" {
		return s
	}
	f := r.scan(s, 0, true)
	if len(f.spans) == 0 {
		return s
	}
	return replace(s, f.spans, 0)
}

// final redacts text that ended where a stream of it ended: a trailing
// start of a secret (minLen bytes or more) is a secret cut short and is
// redacted too, as Sink does at the end of a part, so the result and the
// stream show the same text.
func (r *Redactor) final(s string) string {
	if r.Empty() || s == "" {
		return s
	}
	shown, _, _ := r.cut(s, 0, true)
	return shown
}

// Bytes returns b with every secret replaced by Marker, as text. Use JSON
// for a JSON value: text redaction can break JSON.
func (r *Redactor) Bytes(b []byte) []byte {
	if r.Empty() || len(b) == 0 {
		return b
	}
	s := string(b)
	if out := r.String(s); out != s {
		return []byte(out)
	}
	return b
}

// Contains reports whether b holds any secret, in any spelling; tests use
// it to prove nothing leaked without printing the secret.
func (r *Redactor) Contains(b []byte) bool {
	return !r.Empty() && len(r.find(string(b), false).spans) > 0
}
