package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/server"
	"github.com/runnel/runnel/runnelclient"
)

// run runs one request from a file or stdin through the same decoder and
// run manager as POST /run, printing the result (or NDJSON records). With
// --remote it sends the request to a runnel server instead, and prints
// what that server answers in the same form.
func (m *Main) run(ctx context.Context, args []string) int {
	fs := m.flagSet("run", "runnel run [FILE|-] [--stream] [--remote URL] [flags]")
	stream := fs.Bool("stream", false, "print NDJSON records as the run goes, the result last")
	remote := fs.String("remote", "", "send the request to the runnel serving at this `URL` instead of running it here (token: RUNNEL_TOKEN or --token-file)")
	c := newConfig(fs, m.Getenv, "run", "agents", "log")
	tc := tokenConfig(fs, m.Getenv)
	pos, code, done := parse(fs, args)
	if done {
		return code
	}
	if len(pos) > 1 {
		fmt.Fprintf(m.Stderr, "runnel run: one request file at most, got %d\n", len(pos))
		fs.Usage()
		return exitUsage
	}
	cfg, err := c.load()
	if err != nil {
		return m.fail("run", err)
	}
	var base string
	if *remote != "" {
		if base, err = remoteURL(*remote); err == nil {
			cfg.Token = tc.token() // redacted from the logs, like serve's
			err = errors.Join(tc.errs...)
		}
		if err != nil {
			return m.fail("run", err)
		}
	}
	in, closeIn, err := m.input(pos)
	if err != nil {
		return m.fail("run", err)
	}
	defer closeIn()
	log := cfg.logger(m.Stderr)

	var sink runnel.Sink = runnel.Discard{}
	write := func(res *runnel.Result) error { return printJSON(m.Stdout, res) }
	switch {
	case *stream:
		nw := server.NewNDJSONWriter(m.Stdout, nil)
		sink, write = nw, nw.WriteResult
	case *remote == "":
		col := &server.Collector{}
		sink = col
		write = func(res *runnel.Result) error {
			res.Events = col.Events()
			return printJSON(m.Stdout, res)
		}
	}
	var res *runnel.Result
	if *remote != "" {
		// A transport of its own, closed when the run is done, so no idle
		// connection outlives the command.
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		client := runnelclient.New(base, runnelclient.WithToken(cfg.Token), runnelclient.WithHTTPClient(&http.Client{Transport: tr}))
		res = runRemote(ctx, log, client, base, in, cfg.MaxBodyBytes, *stream, sink)
	} else {
		h, err := setUpHost(cfg, log)
		if err != nil {
			return m.fail("run", err)
		}
		defer h.close(log)
		runner := m.newRunner(cfg.runOptions(log, h))
		res = runOne(ctx, log, runner, in, cfg.MaxBodyBytes, sink)
	}
	if err := write(res); err != nil {
		log.Error("writing the result", slog.Any("err", err))
		return exitFailure
	}
	if !res.OK {
		return exitFailure
	}
	return exitOK
}

// tokenConfig binds --token-file alone, for `run --remote`: the token is
// read as serve reads it (RUNNEL_TOKEN or the file, never both), and
// never from a flag of its own, where ps would show it.
func tokenConfig(fs *flag.FlagSet, getenv func(string) string) *config {
	c := newConfig(fs, getenv)
	for _, s := range settings() {
		if s.flag == "token-file" {
			c.byFlag[s.flag] = s.setting
			c.vals[s.flag] = fs.String(s.flag, "", fmt.Sprintf("with --remote: %s (a `%s`; env %s)", s.usage, s.arg, s.env))
		}
	}
	return c
}

// remoteURL checks a --remote value: an absolute http(s) URL.
func remoteURL(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("--remote=%q is not a runnel URL; give an absolute http(s) URL such as http://127.0.0.1:8765", raw)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// runRemote decodes the request as runOne does, so a bad request gets the
// same answer here as from a server, and sends it to the server. A refusal
// or a failure is the server's own Result-shaped answer; a server that
// cannot be reached (or answers something that is not runnel's) becomes
// one with code unavailable.
func runRemote(ctx context.Context, log *slog.Logger, c *runnelclient.Client, base string, in io.Reader, limit int64, stream bool, sink runnel.Sink) *runnel.Result {
	id := server.NewRequestID()
	req, err := server.DecodeRequest(in, limit)
	if err != nil {
		_, res := server.ErrorResponse(err, id)
		return res
	}
	var res *runnel.Result
	if stream {
		res, err = c.Stream(ctx, req, func(e runnel.Event) {
			if knownEvent(log, e) {
				sink.Emit(e)
			}
		})
	} else {
		res, err = c.Run(ctx, req)
	}
	var rerr *runnelclient.Error
	switch {
	case err == nil:
		return withKnownEvents(log, res)
	case errors.As(err, &rerr) && rerr.Result != nil:
		return withKnownEvents(log, rerr.Result)
	}
	log.Error("remote run failed", slog.String("remote", base), slog.Any("err", err))
	code := runnel.CodeUnavailable
	if ctx.Err() != nil {
		code = runnel.CodeCancelled
	}
	_, res = server.ErrorResponse(&runnel.Error{Code: code, Message: fmt.Sprintf("could not run the request on %s: %v", base, err)}, id)
	return res
}

// knownEvent reports whether this build knows e's type: an event of a newer
// server's type cannot be written again, so it is skipped, as stream
// clients must skip it.
func knownEvent(log *slog.Logger, e runnel.Event) bool {
	if _, err := json.Marshal(e); err != nil {
		log.Warn("skipping an event this runnel does not know", slog.String("type", string(e.Type)))
		return false
	}
	return true
}

// withKnownEvents drops from res the events knownEvent skips, so that the
// result can be written.
func withKnownEvents(log *slog.Logger, res *runnel.Result) *runnel.Result {
	res.Events = slices.DeleteFunc(res.Events, func(e runnel.Event) bool { return !knownEvent(log, e) })
	return res
}

// runOne decodes and runs the request; a refusal or failure becomes the
// same Result-shaped answer the server gives.
func runOne(ctx context.Context, log *slog.Logger, runner server.Runner, in io.Reader, limit int64, sink runnel.Sink) *runnel.Result {
	id := server.NewRequestID()
	req, err := server.DecodeRequest(in, limit)
	var res *runnel.Result
	if err == nil {
		res, err = runner.Run(ctx, req, sink)
		if err == nil && res == nil {
			err = runnel.Errorf(runnel.CodeInternal, "runner returned neither a result nor an error")
		}
	}
	if err != nil {
		if runnel.ErrorCodeOf(err) == runnel.CodeInternal {
			log.Error("internal error", slog.String("requestId", id), slog.Any("err", err))
		}
		_, res = server.ErrorResponse(err, id)
	}
	return res
}

// input opens the request: FILE, or stdin for "-" or no argument.
func (m *Main) input(pos []string) (io.Reader, func(), error) {
	if len(pos) == 0 || pos[0] == "-" {
		return m.Stdin, func() {}, nil
	}
	f, err := os.Open(pos[0])
	if err != nil {
		return nil, nil, fmt.Errorf("reading the request: %w", err)
	}
	return f, func() { f.Close() }, nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
