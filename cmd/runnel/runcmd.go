package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/server"
)

// run runs one request from a file or stdin through the same decoder and
// run manager as POST /run, printing the result (or NDJSON records).
func (m *Main) run(ctx context.Context, args []string) int {
	fs := m.flagSet("run", "runnel run [FILE|-] [--stream] [flags]")
	stream := fs.Bool("stream", false, "print NDJSON records as the run goes, the result last")
	c := newConfig(fs, m.Getenv, "run", "agents", "log")
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
	in, closeIn, err := m.input(pos)
	if err != nil {
		return m.fail("run", err)
	}
	defer closeIn()
	log := cfg.logger(m.Stderr)

	var sink runnel.Sink
	var write func(*runnel.Result) error
	if *stream {
		nw := server.NewNDJSONWriter(m.Stdout, nil)
		sink, write = nw, nw.WriteResult
	} else {
		col := &server.Collector{}
		sink = col
		write = func(res *runnel.Result) error {
			res.Events = col.Events()
			return printJSON(m.Stdout, res)
		}
	}
	h, err := setUpHost(cfg, log)
	if err != nil {
		return m.fail("run", err)
	}
	defer h.close(log)
	runner := m.newRunner(cfg.runOptions(log, h))
	res := runOne(ctx, log, runner, in, cfg.MaxBodyBytes, sink)
	if err := write(res); err != nil {
		log.Error("writing the result", slog.Any("err", err))
		return exitFailure
	}
	if !res.OK {
		return exitFailure
	}
	return exitOK
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
