package main

import (
	"context"
	"log/slog"

	"github.com/runnel/runnel/internal/llmtest"
)

// mockllm serves the scripted fake model until ctx is done.
func (m *Main) mockllm(ctx context.Context, args []string) int {
	fs := m.flagSet("mockllm", "runnel mockllm [--script FILE] [--addr ADDR] [flags]")
	scriptPath := fs.String("script", "", "JSON script of rules (default: echo the user, report tool results)")
	addr := fs.String("addr", "127.0.0.1:8790", "address to listen on")
	var tlsFiles llmtest.TLSFiles
	fs.StringVar(&tlsFiles.Cert, "tls-cert", "", "PEM certificate `file`: serve HTTPS and HTTP/2, as the providers do (with --tls-key)")
	fs.StringVar(&tlsFiles.Key, "tls-key", "", "PEM private key `file` of --tls-cert")
	c := newConfig(fs, m.Getenv, "log")
	pos, code, done := parse(fs, args)
	if done {
		return code
	}
	if len(pos) > 0 || (tlsFiles.Cert == "") != (tlsFiles.Key == "") {
		fs.Usage()
		return exitUsage
	}
	cfg, err := c.load()
	if err != nil {
		return m.fail("mockllm", err)
	}
	script := llmtest.DefaultScript()
	if *scriptPath != "" {
		if script, err = llmtest.LoadScript(*scriptPath); err != nil {
			return m.fail("mockllm", err)
		}
	}
	log := cfg.logger(m.Stderr)
	if err := llmtest.Serve(ctx, *addr, script, tlsFiles, log); err != nil {
		log.Error("mockllm stopped", slog.Any("err", err))
		return exitFailure
	}
	return exitOK
}
