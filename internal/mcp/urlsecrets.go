package mcp

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"sort"
	"strings"
)

// displayURL is a URL as messages show it: its origin, scheme://host[:port].
// MCP providers put credentials in the path (https://host/mcp/<key>/sse),
// the query (?api_key=…) and the user info, so none of those is shown.
func displayURL(u *url.URL) string {
	v := url.URL{Scheme: u.Scheme, Host: u.Host}
	return v.String()
}

// sameOrigin reports whether two URLs share scheme, host and port.
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && urlPort(a) == urlPort(b)
}

// SecretURLParts returns the pieces of an MCP server URL that may be a
// credential, for a redactor to hide wherever they appear in a run's
// output. The rule:
//
//   - the password of the user info, and the user name when there is no
//     password (https://<token>@host) or it looks like a key;
//   - every path segment that looks like a key;
//   - every query (and fragment) value that looks like a key, or whose
//     name says it is a credential (it contains key, token, secret, pass,
//     auth, sig, cred, session or jwt) and that has at least 8 characters.
//
// "Looks like a key" is at least 16 characters mixing letters and digits,
// or at least 32 characters of anything: API keys are long and random,
// path words (mcp, sse, v1, a date) are short or plain. A long plain slug
// is hidden too; hiding it costs little, and showing a key costs a lot.
// Shorter credential-named values are left out: hiding "abc" everywhere
// would shred the run's text. Each piece comes as written in the URL and,
// when it differs, percent-decoded; longest first, so a replacement of the
// whole wins over one of its parts. A URL that does not parse gives nil.
func SecretURLParts(rawURL string) []string {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil {
		return nil
	}
	set := map[string]bool{}
	add := func(escaped string, unescape func(string) (string, error)) {
		set[escaped] = true
		if plain, err := unescape(escaped); err == nil {
			set[plain] = true
		}
	}
	if u.User != nil {
		name := u.User.Username()
		pass, hasPass := u.User.Password()
		if pass != "" {
			add(pass, noUnescape)
			add(url.PathEscape(pass), url.PathUnescape)
		}
		if name != "" && (!hasPass || keyLike(name)) {
			add(name, noUnescape)
			add(url.PathEscape(name), url.PathUnescape)
		}
	}
	for seg := range strings.SplitSeq(u.EscapedPath(), "/") {
		if plain, err := url.PathUnescape(seg); err == nil && keyLike(plain) {
			add(seg, url.PathUnescape)
		}
	}
	for _, query := range []string{u.RawQuery, u.EscapedFragment()} {
		for pair := range strings.SplitSeq(query, "&") {
			name, value, _ := strings.Cut(pair, "=")
			plain, err := url.QueryUnescape(value)
			if err != nil || plain == "" {
				continue
			}
			if keyLike(plain) || credentialName(name) && len(plain) >= 8 {
				add(value, url.QueryUnescape)
			}
		}
	}
	if len(set) == 0 {
		return nil
	}
	parts := make([]string, 0, len(set))
	for p := range set {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool {
		if len(parts[i]) != len(parts[j]) {
			return len(parts[i]) > len(parts[j])
		}
		return parts[i] < parts[j]
	})
	return parts
}

func noUnescape(s string) (string, error) { return s, nil }

// keyLike reports whether s has the shape of an API key: see SecretURLParts.
func keyLike(s string) bool {
	if len(s) >= 32 {
		return true
	}
	letter, digit := false, false
	for _, c := range s {
		switch {
		case c >= '0' && c <= '9':
			digit = true
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			letter = true
		}
	}
	return len(s) >= 16 && letter && digit
}

func credentialName(name string) bool {
	name = strings.ToLower(name)
	for _, w := range []string{"key", "token", "secret", "pass", "auth", "sig", "cred", "session", "jwt"} {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// redacted replaces a secret in what this package shows; the run's
// redactor uses the same marker.
const redacted = "[REDACTED]"

// scrubber hides one server's URL secrets in the text this package
// produces. The SDK and net/http put URLs in their errors (Post
// "https://…/mcp/<key>?api_key=…": EOF), the SSE message endpoint among
// them, which is not the configured URL; so every URL in a message is cut
// to its origin, and then every piece SecretURLParts names is replaced.
type scrubber struct {
	secrets []string
}

func newScrubber(rawURL string) scrubber {
	var s scrubber
	for _, p := range SecretURLParts(rawURL) {
		if len(p) >= 4 { // shorter pieces would shred the text around them
			s.secrets = append(s.secrets, p)
		}
	}
	return s
}

// message scrubs a sentence of runnel's: URLs cut to their origin, secrets
// replaced.
func (s scrubber) message(msg string) string { return s.content(originsOnly(msg)) }

// content scrubs what a server sent (a tool's result): URLs in it are its
// business, the configured URL's secrets are not shown.
func (s scrubber) content(text string) string {
	for _, secret := range s.secrets {
		text = strings.ReplaceAll(text, secret, redacted)
	}
	return text
}

// originsOnly replaces every URL in s by its origin.
func originsOnly(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		start := i
		for start > 0 && schemeByte(s[start-1]) {
			start--
		}
		end := i + len("://")
		for end < len(s) && !endsURL(s[end]) {
			end++
		}
		// Punctuation after a URL ("…/mcp: EOF") belongs to the sentence.
		for end > i+len("://") && strings.IndexByte(".,;:!?", s[end-1]) >= 0 {
			end--
		}
		b.WriteString(s[:start])
		b.WriteString(origin(s[start:i], s[i+len("://"):end]))
		s = s[end:]
	}
}

// origin is scheme://host[:port] of a URL's scheme and the rest after "://".
func origin(scheme, rest string) string {
	authority := rest
	if j := strings.IndexAny(authority, "/?#"); j >= 0 {
		authority = authority[:j]
	}
	if j := strings.LastIndexByte(authority, '@'); j >= 0 {
		authority = authority[j+1:]
	}
	return scheme + "://" + authority
}

func schemeByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'
}

func endsURL(c byte) bool {
	return c <= ' ' || strings.IndexByte("\"'<>`\\", c) >= 0
}

// scrubHandler is a slog.Handler that scrubs the message and every string
// attribute of a record (groups included) before passing it on: the SDK
// logs what it likes, URLs included.
type scrubHandler struct {
	next  slog.Handler
	scrub scrubber
}

func (h *scrubHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *scrubHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.scrub.message(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *scrubHandler) WithAttrs(as []slog.Attr) slog.Handler {
	scrubbed := make([]slog.Attr, len(as))
	for i, a := range as {
		scrubbed[i] = h.attr(a)
	}
	return &scrubHandler{next: h.next.WithAttrs(scrubbed), scrub: h.scrub}
}

func (h *scrubHandler) WithGroup(name string) slog.Handler {
	return &scrubHandler{next: h.next.WithGroup(name), scrub: h.scrub}
}

func (h *scrubHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.scrub.message(v.String()))
	case slog.KindGroup:
		group := v.Group()
		scrubbed := make([]any, len(group))
		for i, ga := range group {
			scrubbed[i] = h.attr(ga)
		}
		return slog.Group(a.Key, scrubbed...)
	case slog.KindAny:
		return slog.String(a.Key, h.scrub.message(fmt.Sprint(v.Any())))
	}
	return slog.Attr{Key: a.Key, Value: v}
}
