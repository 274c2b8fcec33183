package benchkit

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/runnel/runnel/internal/llmtest"
)

// Model is the fake model (internal/llmtest) on a loopback port, for a
// benchmark: it records no request. llmtest.NewServer keeps every request,
// whole, for tests to read; over a benchmark's thousands of steps of a
// growing conversation that is hundreds of megabytes in the process that
// serves the model, and garbage collection work in whatever shares it.
type Model struct {
	// URL is the base URL, "http://127.0.0.1:port"; OpenAI clients use
	// URL+"/v1".
	URL     string
	handler *llmtest.Handler
	srv     *http.Server
	served  chan struct{}
}

// ServeModel serves the script on 127.0.0.1 and a free port until Close.
func ServeModel(s llmtest.Script) (*Model, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("fake model script: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the fake model: %w", err)
	}
	m := &Model{
		URL:     "http://" + ln.Addr().String(),
		handler: llmtest.NewServeHandler(s, slog.New(slog.DiscardHandler)),
		served:  make(chan struct{}),
	}
	m.srv = &http.Server{Handler: m.handler, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(m.served)
		_ = m.srv.Serve(ln) // http.ErrServerClosed after Close
	}()
	return m, nil
}

// Close ends slowed replies, closes the listener and every connection, and
// waits for the server's goroutines.
func (m *Model) Close() {
	m.handler.Close()
	_ = m.srv.Close()
	<-m.served
}
