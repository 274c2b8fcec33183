package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TransportStdio is a server that is a program runnel starts, speaking
// newline-delimited JSON-RPC on its standard input and output. It runs
// only inside the isolated sandbox (Options.Stdio).
const TransportStdio = "stdio"

// Program is a started stdio server: its standard input and output, why
// it failed when it did (its standard error's tail), and End, which
// stops it and everything it started.
type Program struct {
	Stdin  io.WriteCloser
	Stdout io.ReadCloser
	// Stderr is the tail of what it wrote on standard error so far.
	Stderr func() string
	// Exited, when not nil, is closed once the program has exited and
	// its standard error has been read to the end.
	Exited <-chan struct{}
	End    func() error
}

// exitTailWait bounds how long a failure waits for a program that closed
// its output to exit, so that its last words are in the tail.
const exitTailWait = time.Second

// stderr is the tail of the program's standard error. Its output closing
// and its standard error being read are not ordered: a program that
// writes why it fails and exits may be seen gone before its words
// arrive, so this waits (briefly) for it to have exited.
func (p *Program) stderr() string {
	if p.Stderr == nil {
		return ""
	}
	if p.Exited != nil {
		t := time.NewTimer(exitTailWait)
		select {
		case <-p.Exited:
		case <-t.C:
		}
		t.Stop()
	}
	return p.Stderr()
}

// StartFunc starts a stdio server's program; Options.Stdio.
type StartFunc func(ctx context.Context, spec ServerSpec) (*Program, error)

// connectStdio starts the program of a stdio server and opens its
// session, with every message bounded like an HTTP server's.
func connectStdio(ctx context.Context, spec ServerSpec, o *Options, scrub scrubber) (*server, []*mcp.Tool, []string) {
	if o.Stdio == nil {
		return nil, nil, []string{unavailable(spec.Name, "this run has no sandbox to start a stdio server in")}
	}
	cctx, cancel := context.WithTimeout(ctx, o.ConnectTimeout)
	defer cancel()
	prog, err := o.Stdio(cctx, spec)
	if err != nil {
		return nil, nil, []string{unavailable(spec.Name, "its program could not be started: "+scrub.message(err.Error()))}
	}
	stdout := &lineBound{r: prog.Stdout, limit: o.MaxMessageBytes}
	srv := &server{spec: spec, program: prog, stdout: stdout, endLife: func() {}, scrub: scrub}
	fail := func(method string, err error) (*server, []*mcp.Tool, []string) {
		reason := srv.stdioFailure(method, err)
		if errors.Is(cctx.Err(), context.DeadlineExceeded) {
			reason = "it did not answer " + method + " within the connect timeout"
		}
		_ = srv.close()
		return nil, nil, []string{unavailable(spec.Name, reason)}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "runnel", Version: o.Version}, &mcp.ClientOptions{
		Logger:       srv.logger(o.Logger),
		Capabilities: &mcp.ClientCapabilities{},
	})
	// The SDK's own line bound stays as a second line behind lineBound.
	line := int(min(o.MaxMessageBytes, 1<<40)) + 1
	if srv.session, err = client.Connect(cctx, &mcp.IOTransport{Reader: stdout, Writer: prog.Stdin, MaxLineLength: line}, nil); err != nil {
		return fail("initialize", err)
	}
	tools, notices, err := listTools(cctx, srv.session, spec, o.MaxTools)
	if err != nil {
		if errors.Is(err, errTooManyTools) {
			_ = srv.close()
			return nil, nil, []string{unavailable(spec.Name, limits{tools: o.MaxTools}.tooManyTools())}
		}
		return fail("tools/list", err)
	}
	return srv, tools, notices
}

// stdioFailure says why a request to a stdio server got no answer: a
// message over the bound, or the program gone (with the last line it
// wrote on standard error), or what the SDK says.
func (s *server) stdioFailure(method string, err error) string {
	switch {
	case s.stdout.over.Load():
		return "a message it sent is " + limits{message: s.stdout.limit}.tooLarge()
	case programGone(err):
		reason := "its program stopped before answering " + method
		if tail := strings.TrimSpace(s.program.stderr()); tail != "" {
			reason += "; it wrote: " + finalLine(tail)
		}
		return s.scrub.message(reason)
	}
	return method + " failed: " + s.scrub.message(err.Error())
}

// programGone reports whether err says a stdio server's output ended: the
// SDK's closed connection, or the end of the output itself when the
// program died with a call in flight.
func programGone(err error) bool {
	return errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// errLineTooLong ends the reading of a stdio server that sent a line
// over the message bound.
var errLineTooLong = errors.New("a message from the MCP server is over runnel's bound")

// lineBound reads a stdio server's output and fails once one line runs
// past limit bytes, so no message over the bound is ever buffered.
type lineBound struct {
	r     io.ReadCloser
	limit int64
	run   int64 // bytes since the last newline
	over  atomic.Bool
}

func (b *lineBound) Read(p []byte) (int, error) {
	if b.over.Load() {
		return 0, errLineTooLong
	}
	n, err := b.r.Read(p)
	// Every line the read ends counts, not only the last: one read may
	// hold the end of a long line and the start of the next.
	rest := p[:n]
	for {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			b.run += int64(len(rest))
			break
		}
		if b.run+int64(i) > b.limit {
			b.run = b.limit + 1
			break
		}
		b.run, rest = 0, rest[i+1:]
	}
	if b.run > b.limit {
		b.over.Store(true)
		return 0, errLineTooLong
	}
	return n, err
}

func (b *lineBound) Close() error { return b.r.Close() }

// envScrubber hides the values of a stdio server's environment (its
// credentials, as a rule) in what runnel says about it.
func envScrubber(env map[string]string) scrubber {
	var s scrubber
	for _, v := range env {
		if len(v) >= 4 {
			s.secrets = append(s.secrets, v)
		}
	}
	return s
}

// finalLine is the last line of s, which is where a program that failed
// usually says why.
func finalLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[i+1:])
	}
	return s
}

// closeProgram ends a stdio server's program once its session is closed.
func (s *server) closeProgram() error {
	if s.program == nil {
		return nil
	}
	if err := s.program.End(); err != nil {
		return fmt.Errorf("ending MCP server %q: %w", s.spec.Name, err)
	}
	return nil
}
