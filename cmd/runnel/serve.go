package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/runnel/runnel/internal/playground"
	"github.com/runnel/runnel/internal/server"
)

// serve runs the daemon until ctx is done (SIGINT/SIGTERM), then drains.
func (m *Main) serve(ctx context.Context, args []string) int {
	fs := m.flagSet("serve", "runnel serve [--playground] [flags]")
	withPlayground := fs.Bool("playground", false, "serve the playground page at /playground/ (a chat on POST /v1/chat)")
	c := newConfig(fs, m.Getenv, "listen", "run", "agents", "log")
	pos, code, done := parse(fs, args)
	if done {
		return code
	}
	if len(pos) > 0 {
		fs.Usage()
		return exitUsage
	}
	cfg, err := c.load()
	if err != nil {
		return m.fail("serve", err)
	}
	if err := cfg.listenCheck(); err != nil {
		return m.fail("serve", err)
	}
	log := cfg.logger(m.Stderr)
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)))
	if err != nil {
		log.Error("cannot listen", slog.Any("err", err))
		return exitFailure
	}
	return m.serveOn(ctx, "serve", cfg, log, ln, func(o *server.Options) {
		if *withPlayground {
			o.Playground = playground.Handler()
		}
	})
}

// serveOn serves on ln (which it closes) until ctx is done, with the
// server options of cfg as adjust changes them.
func (m *Main) serveOn(ctx context.Context, cmd string, cfg *Config, log *slog.Logger, ln net.Listener, adjust func(*server.Options)) int {
	defer ln.Close()
	h, err := setUpHost(cfg, log)
	if err != nil {
		return m.fail(cmd, err)
	}
	// Deferred first, so it runs last: after Serve has cancelled and
	// drained every run, whatever their commands left is ended.
	defer h.close(log)
	runner := m.newRunner(cfg.runOptions(log, h))
	opts := cfg.serverOptions(log, runner.Harnesses(), h)
	adjust(opts)
	srv := server.New(runner, opts)
	if cfg.MetricsAddr != "" {
		stop, err := serveMetrics(cfg.MetricsAddr, h.tel.Metrics().Handler(), log)
		if err != nil {
			return m.fail(cmd, err)
		}
		defer stop()
	}
	if cfg.Token == "" {
		log.Warn("no token set: requests are not authenticated (allowed on loopback only); set RUNNEL_TOKEN to require one")
	}
	log.Info("runnel listening", slog.String("addr", ln.Addr().String()), slog.String("version", version),
		slog.Bool("auth", cfg.Token != ""))
	if m.Listening != nil {
		m.Listening(ln.Addr())
	}
	if err := srv.Serve(ctx, ln); err != nil {
		log.Error("serving stopped", slog.Any("err", err))
		return exitFailure
	}
	return exitOK
}

// serveMetrics serves GET /metrics, without a token, on a listener of its
// own (RUNNEL_METRICS_ADDR) until stop: a scraper needs no run token, and
// the port can be kept inside the cluster.
func serveMetrics(addr string, metrics http.Handler, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics listener stopped", slog.Any("err", err))
		}
	}()
	log.Info("metrics listening", slog.String("addr", ln.Addr().String()))
	return func() {
		srv.Close()
		<-done
	}, nil
}
