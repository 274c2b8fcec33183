package redact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

type errString string

func (e errString) Error() string { return string(e) }

// valuer logs as a group holding its token, as a request type might.
type valuer struct{ token string }

func (v valuer) LogValue() slog.Value {
	return slog.GroupValue(slog.String("token", v.token), slog.Int("n", 1))
}

type stringer struct{ s string }

func (s stringer) String() string { return "stringer " + s.s }

// Every way slog lets a value into a record, groups included, goes
// through redaction: the secret never reaches the inner handler.
func TestHandlerGroups(t *testing.T) {
	const secret = `hunter2-the-"pass"/word`
	tests := []struct {
		name string
		log  func(l *slog.Logger)
	}{
		{"message", func(l *slog.Logger) { l.Info("connecting with " + secret) }},
		{"attr", func(l *slog.Logger) { l.Info("m", "k", secret) }},
		{"WithGroup", func(l *slog.Logger) { l.WithGroup("g").Info("m", "k", secret) }},
		{"Group attr", func(l *slog.Logger) { l.Info("m", slog.Group("g", "k", secret)) }},
		{"nested Group", func(l *slog.Logger) { l.Info("m", slog.Group("g", slog.Group("h", "k", secret))) }},
		{"inline group", func(l *slog.Logger) { l.Info("m", slog.Group("", "k", secret)) }},
		{"With", func(l *slog.Logger) { l.With("k", secret).Info("m") }},
		{"With a group", func(l *slog.Logger) { l.With(slog.Group("g", "k", secret)).Info("m") }},
		{"WithGroup then With", func(l *slog.Logger) { l.WithGroup("g").With("k", secret).WithGroup("h").Info("m", "x", 1) }},
		{"error", func(l *slog.Logger) { l.Info("m", "err", fmt.Errorf("dial: %w", errString(secret))) }},
		{"error in a group", func(l *slog.Logger) { l.Info("m", slog.Group("g", "err", errString(secret))) }},
		{"LogValuer", func(l *slog.Logger) { l.Info("m", "req", valuer{secret}) }},
		{"LogValuer in a group", func(l *slog.Logger) { l.WithGroup("g").Info("m", slog.Group("h", "req", valuer{secret})) }},
		{"LogValuer in With", func(l *slog.Logger) { l.With("req", valuer{secret}).Info("m") }},
		{"Stringer", func(l *slog.Logger) { l.Info("m", "s", stringer{secret}) }},
		{"struct", func(l *slog.Logger) { l.Info("m", "s", struct{ Token string }{secret}) }},
		{"map", func(l *slog.Logger) { l.Info("m", "s", map[string]string{"token": secret}) }},
		{"bytes", func(l *slog.Logger) { l.Info("m", "b", []byte("x "+secret)) }},
		{"raw JSON", func(l *slog.Logger) {
			l.Info("m", "in", json.RawMessage(`{"t":"`+strings.ReplaceAll(secret, `"`, `\"`)+`"}`))
		}},
		{"key", func(l *slog.Logger) { l.Info("m", secret, 1) }},
		{"group name", func(l *slog.Logger) { l.WithGroup(secret).Info("m", "k", 1) }},
		{"Group attr name", func(l *slog.Logger) { l.Info("m", slog.Group(secret, "k", 1)) }},
		{"escaped in a string", func(l *slog.Logger) { l.Info("m", "body", `{"p":"hunter2-the-\"pass\"\/word"}`) }},
	}
	for _, tt := range tests {
		for _, format := range []string{"json", "text"} {
			t.Run(tt.name+"/"+format, func(t *testing.T) {
				var buf bytes.Buffer
				var h slog.Handler = slog.NewJSONHandler(&buf, nil)
				if format == "text" {
					h = slog.NewTextHandler(&buf, nil)
				}
				tt.log(slog.New(New(secret).Handler(h)))
				if l := leak(buf.String(), secret); l != "" {
					t.Errorf("%s\n%s", l, buf.String())
				}
				if !strings.Contains(buf.String(), Marker) {
					t.Errorf("no marker: the record lost the redacted value\n%s", buf.String())
				}
			})
		}
	}
}
