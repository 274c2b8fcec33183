package llmtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Server is a [Handler] listening on a loopback port, like an httptest.Server
// (which it does not use, so that the runnel binary does not link httptest).
type Server struct {
	// URL is the base URL, "http://127.0.0.1:port" with no trailing slash.
	// OpenAI clients use URL+"/v1"; Anthropic and Gemini clients use URL.
	URL string

	handler *Handler
	srv     *http.Server
	served  chan struct{}
}

// NewServer starts a server for the script on 127.0.0.1 and a free port. It
// panics when the script is invalid or no port can be opened, as
// httptest.NewServer does: both are failures of the test's setup.
func NewServer(s Script) *Server {
	h := NewHandler(s)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("llmtest: listen: %v", err))
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln) // returns http.ErrServerClosed after Close
	}()
	return &Server{URL: "http://" + ln.Addr().String(), handler: h, srv: srv, served: served}
}

// Handler returns the server's handler.
func (s *Server) Handler() *Handler { return s.handler }

// Requests returns a copy of the model requests received so far, in order.
func (s *Server) Requests() []Request { return s.handler.Requests() }

// Close ends hung and slowed responses, closes the listener and every
// connection, and waits for the server's goroutines to finish.
func (s *Server) Close() {
	s.handler.unblock()
	_ = s.srv.Close()
	<-s.served
	s.handler.Close()
}

// NewServeHandler is the handler of a long-running fake model (Serve's,
// and runnel demo's): it logs one line per request and records none, so
// its memory does not grow with use.
func NewServeHandler(s Script, logger *slog.Logger) *Handler {
	h := NewHandler(s)
	h.logger = logger
	h.discard = true
	return h
}

// shutdownGrace is how long Serve lets responses in flight finish.
const shutdownGrace = 2 * time.Second

// TLSFiles are the PEM certificate and key a fake model serves HTTPS (and
// HTTP/2, as the providers' APIs do) with; empty, it serves plain HTTP/1.1.
type TLSFiles struct{ Cert, Key string }

// Serve runs the fake model server on addr (e.g. "127.0.0.1:8766") until ctx
// is done, logging one line per request (never headers or bodies). It is
// `runnel mockllm`. It returns nil after a shutdown caused by ctx, and an
// error when the script is invalid or the address cannot be served.
func Serve(ctx context.Context, addr string, s Script, tlsFiles TLSFiles, logger *slog.Logger) error {
	if err := s.Validate(); err != nil {
		return fmt.Errorf("llmtest: invalid script: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	h := NewServeHandler(s, logger)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("llmtest: listen on %s: %w", addr, err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	url := "http://" + ln.Addr().String()
	if tlsFiles.Cert != "" {
		url = "https://" + ln.Addr().String()
	}
	logger.Info("mockllm listening", "url", url, "openai_base_url", url+"/v1",
		"anthropic_base_url", url, "gemini_base_url", url, "rules", len(s.Rules))

	errc := make(chan error, 1)
	go func() {
		if tlsFiles.Cert != "" {
			errc <- srv.ServeTLS(ln, tlsFiles.Cert, tlsFiles.Key)
			return
		}
		errc <- srv.Serve(ln)
	}()
	select {
	case err := <-errc:
		h.Close()
		return fmt.Errorf("llmtest: serve: %w", err)
	case <-ctx.Done():
	}
	// Hangs and slow streams would hold a graceful shutdown for its whole grace
	// period; release them first.
	h.unblock()
	grace, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(grace); err != nil {
		_ = srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		h.Close()
		return fmt.Errorf("llmtest: serve: %w", err)
	}
	h.Close()
	logger.Info("mockllm stopped")
	return nil
}
