// Package testlog is for tests that read what a server logs (or prints)
// from its own goroutines while the test runs.
//
//	var logs testlog.Buffer
//	srv := server.New(runner, &server.Options{Logger: logs.Logger()})
//	…
//	if strings.Contains(logs.String(), secret) { t.Error("a secret was logged") }
package testlog

import (
	"bytes"
	"log/slog"
	"sync"
)

// Buffer is an io.Writer that is safe for concurrent use and can be read
// at any time. The zero value is ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Logger is a JSON logger at debug level writing to b.
func (b *Buffer) Logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
