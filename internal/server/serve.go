package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Serve serves on ln until ctx is done, then drains (DESIGN §8): after
// ShutdownDelay, if any, of serving as a replica being taken out, it stops
// accepting, lets in-flight requests finish within ShutdownGrace, then
// cancels the runs still going, waits for their handlers to answer, and
// closes the remaining connections. It returns nil after a drain, or the
// error that stopped it serving.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	// Runs derive from runCtx, not from ctx: ctx ending starts the drain,
	// and only the end of the grace period cancels the runs.
	runCtx, cancelRuns := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRuns()
	hs := &http.Server{
		Handler:           s,
		BaseContext:       func(net.Listener) context.Context { return runCtx },
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		_ = hs.Close()
		return fmt.Errorf("serving on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}

	if d := s.opts.ShutdownDelay; d > 0 {
		s.draining.Store(true)
		s.log.Info("draining: still accepting while balancers see /health answer 503",
			slog.String("delay", d.String()), slog.Int("inflight", s.inflight.count()))
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case err := <-served:
			t.Stop()
			_ = hs.Close()
			return fmt.Errorf("serving on %s: %w", ln.Addr(), err)
		}
	}
	s.log.Info("draining: accepting no new requests", slog.Int("inflight", s.inflight.count()),
		slog.String("grace", s.opts.ShutdownGrace.String()))
	graceCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.ShutdownGrace)
	err := hs.Shutdown(graceCtx)
	cancel()
	if errors.Is(err, context.DeadlineExceeded) {
		s.log.Warn("grace period over: cancelling in-flight runs", slog.Int("inflight", s.inflight.count()))
		cancelRuns()
		// The cancelled runs answer (a cancelled result); give net/http a
		// bounded moment to deliver those answers before closing.
		finishCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
		if err := hs.Shutdown(finishCtx); err != nil {
			s.log.Warn("closing connections whose answers were not delivered", slog.Any("err", err))
		}
		cancel()
		err = nil
	}
	// Close unblocks any handler stuck writing to a client that stopped
	// reading; then no handler (and no run) outlives Serve.
	_ = hs.Close()
	s.inflight.wait()
	<-served // http.ErrServerClosed, as Shutdown was called
	s.log.Info("stopped")
	return err
}

// finishTimeout bounds how long cancelled runs have to deliver their
// answers once the grace period is over.
const finishTimeout = 10 * time.Second

// tracker counts requests in flight so Serve can wait for handlers that
// outlive http.Server.Close. Unlike a WaitGroup it tolerates a request
// starting while someone waits.
type tracker struct {
	mu      sync.Mutex
	n       int
	waiters []chan struct{}
}

func (t *tracker) add() {
	t.mu.Lock()
	t.n++
	t.mu.Unlock()
}

func (t *tracker) done() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n--; t.n == 0 {
		for _, w := range t.waiters {
			close(w)
		}
		t.waiters = nil
	}
}

func (t *tracker) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

// wait returns once no request is in flight.
func (t *tracker) wait() {
	t.mu.Lock()
	if t.n == 0 {
		t.mu.Unlock()
		return
	}
	w := make(chan struct{})
	t.waiters = append(t.waiters, w)
	t.mu.Unlock()
	<-w
}
