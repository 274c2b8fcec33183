package redact

import (
	"context"
	"encoding/json"
	"log/slog"
)

// Handler returns a slog.Handler that redacts the message, every key and
// group name, and every value (groups and LogValuers resolved) before
// passing a record to h. A value slog would print through fmt or
// encoding/json is turned into its redacted text, except a
// json.RawMessage, which stays JSON.
func (r *Redactor) Handler(h slog.Handler) slog.Handler {
	if r.Empty() {
		return h
	}
	return &handler{r: r, next: h}
}

type handler struct {
	r    *Redactor
	next slog.Handler
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.r.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = h.r.attr(a)
	}
	return &handler{r: h.r, next: h.next.WithAttrs(red)}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{r: h.r, next: h.next.WithGroup(h.r.String(name))}
}

func (r *Redactor) attr(a slog.Attr) slog.Attr {
	key := r.String(a.Key)
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(key, r.String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]slog.Attr, len(g))
		for i, ga := range g {
			red[i] = r.attr(ga)
		}
		return slog.Attr{Key: key, Value: slog.GroupValue(red...)}
	case slog.KindAny:
		return slog.Attr{Key: key, Value: r.anyValue(v.Any())}
	}
	return slog.Attr{Key: key, Value: v}
}

// anyValue redacts a value slog would print through fmt or encoding/json,
// where the secret could come out in a spelling text redaction cannot see
// (a []byte as a list of decimal numbers, or base64).
func (r *Redactor) anyValue(v any) slog.Value {
	switch v := v.(type) {
	case json.RawMessage:
		return slog.AnyValue(r.JSON(v))
	case []byte:
		return slog.StringValue(r.String(string(v)))
	case error:
		return slog.StringValue(r.String(v.Error()))
	}
	return slog.StringValue(r.String(slog.AnyValue(v).String()))
}
