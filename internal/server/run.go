package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/runnel/runnel"
)

// handleRun serves POST /run and POST /stream: the body, then a capacity
// slot, then one run answered as one JSON result or as NDJSON.
//
// The body is read before a run slot is taken, so clients that upload
// slowly hold no run slot: they hold one of the readers (twice as many as
// run slots, which bounds the memory bodies take), for at most the body
// timeout.
func (s *Server) handleRun(w http.ResponseWriter, r *http.Request) {
	var req *runnel.RunRequest
	if !s.readBody(w, r, func(body io.Reader) (err error) {
		req, err = DecodeRequest(body, s.opts.MaxBodyBytes)
		return err
	}) {
		return
	}
	release, ok := s.takeSlot(w, r)
	if !ok {
		return
	}
	defer release()
	// POST /kill for the run's session cancels it like a client that left.
	// The run gets ctx rather than a copy of r made with it: a run idles on
	// its model for minutes, and every copy and context it holds is paid
	// per concurrent run.
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	defer s.live.add(req, cancel)()
	if wantsNDJSON(r) {
		s.stream(ctx, cancel, w, r, req)
		return
	}
	s.oneShot(ctx, w, r, req)
}

// readBody reads the body with decode, holding one of the readers (twice
// as many as run slots, which bounds the memory bodies take) for at most
// the body timeout. It reports whether decode succeeded; otherwise the
// answer has been written.
//
// After a good body it lifts the read deadline: it must not cut the run,
// and the connection's background read (which notices a client going
// away) must stay armed. After a bad one the deadline stays and the
// connection closes, so net/http does not wait on the rest of a body
// nobody will read.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, decode func(io.Reader) error) bool {
	select {
	case s.readers <- struct{}{}:
	default:
		s.writeError(w, r, &runnel.Error{Code: runnel.CodeAtCapacity, Message: fmt.Sprintf(
			"runnel is reading %d request bodies already; retry shortly, or raise RUNNEL_CONCURRENCY_LIMIT on the server",
			cap(s.readers))})
		return false
	}
	defer func() { <-s.readers }()
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.opts.BodyTimeout)) // unsupported only on exotic writers
	if err := decode(declaredBody{http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes), r.ContentLength}); err != nil {
		w.Header().Set("Connection", "close")
		if errors.Is(err, os.ErrDeadlineExceeded) {
			err = runnel.Errorf(runnel.CodeInvalidRequest,
				"the request body did not arrive within %s; send the whole body at once", s.opts.BodyTimeout)
		}
		s.writeError(w, r, err)
		return false
	}
	_ = rc.SetReadDeadline(time.Time{})
	return true
}

// takeSlot takes a run slot, or answers 429. Bodies are read before a
// slot is taken, so clients that upload slowly hold no run slot.
func (s *Server) takeSlot(w http.ResponseWriter, r *http.Request) (release func(), ok bool) {
	select {
	case s.slots <- struct{}{}:
		return func() { <-s.slots }, true
	default:
		s.writeError(w, r, &runnel.Error{Code: runnel.CodeAtCapacity, Message: fmt.Sprintf(
			"runnel is running its limit of %d concurrent runs; retry shortly, or raise RUNNEL_CONCURRENCY_LIMIT on the server",
			s.opts.ConcurrencyLimit)})
		return nil, false
	}
}

// wantsNDJSON reports whether the caller accepts NDJSON. application/ndjson
// is accepted too; the answer is always labelled application/x-ndjson.
func wantsNDJSON(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err == nil && (mt == "application/x-ndjson" || mt == "application/ndjson") {
				return true
			}
		}
	}
	return false
}

// run calls the Runner on ctx, the request's context or one derived from
// it, so a client that goes away (or a server that gives up draining)
// cancels the run.
func (s *Server) run(ctx context.Context, req *runnel.RunRequest, sink runnel.Sink) (*runnel.Result, error) {
	res, err := s.runner.Run(ctx, req, sink)
	if err == nil && res == nil {
		err = runnel.Errorf(runnel.CodeInternal, "runner returned neither a result nor an error")
	}
	return res, err
}

func (s *Server) oneShot(ctx context.Context, w http.ResponseWriter, r *http.Request, req *runnel.RunRequest) {
	var events Collector
	res, err := s.run(ctx, req, &events)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res.Events = events.Events()
	fixResult(res, requestIDOf(r))
	s.writeJSON(w, r, StatusOf(res), res)
}

// stream answers with NDJSON (DESIGN §3.5). A refusal comes inside the
// stream too (DESIGN §3.3): status 200, an error event, done, and the
// result record with the sentence and the code, exactly like a run that
// failed. Stream clients (Agenta's among them) discard the body of a 4xx
// and show the person only its status; inside the stream the sentence
// reaches whoever can act on it. Only what is decided before the run
// (undecodable JSON, authentication, size, capacity) keeps its status.
func (s *Server) stream(ctx context.Context, cancel context.CancelCauseFunc, w http.ResponseWriter, r *http.Request, req *runnel.RunRequest) {
	nw := NewNDJSONWriter(w, nil)
	res, refused := s.runStreamed(ctx, cancel, w, r, &nw.lineWriter, ndjsonBeat, func(h http.Header) {
		h.Set("Content-Type", "application/x-ndjson")
	}, func(ctx context.Context) (*runnel.Result, error) { return s.run(ctx, req, nw) })
	if refused {
		nw.Emit(runnel.Event{Type: runnel.EventError, Message: res.Error, Code: res.ErrorCode})
		nw.Emit(runnel.Event{Type: runnel.EventDone, StopReason: res.StopReason})
	}
	// Nothing written yet means the run ended without a single event; the
	// status then says how, as in one-shot mode.
	s.finishStream(w, r, nw.writeResult(res, StatusOf(res)))
}

// runStreamed calls run on ctx with a sink writing through lw: every write
// under the write timeout, a client that stops reading (a write that
// blocks past it) treated like one that left, whose run is cancelled
// (cancel, ctx's own, which the caller holds for POST /kill as well)
// instead of waited on for ever, and beat written after KeepAlive of
// silence. header sets the content type before the first byte. A refusal
// comes back as a result like a failed run's (refused true), for the
// caller to put inside the stream.
func (s *Server) runStreamed(ctx context.Context, cancel context.CancelCauseFunc, w http.ResponseWriter, r *http.Request,
	lw *lineWriter, beat string, header func(http.Header), run func(context.Context) (*runnel.Result, error)) (res *runnel.Result, refused bool) {
	id := requestIDOf(r)
	rc := http.NewResponseController(w)
	lw.flush = rc.Flush
	lw.deadline = func() error { return rc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout)) }
	lw.gone = func(err error) { cancel(fmt.Errorf("%w: %w", errClientGone, err)) }
	lw.start = func(status int) {
		h := w.Header()
		header(h)
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		w.WriteHeader(status)
	}
	stopKeepAlive := lw.keepAlive(s.opts.KeepAlive, beat)
	defer stopKeepAlive() // also on a panic, so nothing writes after the handler
	res, err := run(ctx)
	stopKeepAlive()
	if err != nil {
		s.logError(r, id, err)
		_, res = ErrorResponse(err, id)
		res.StopReason = runnel.StopError
		if res.Status == runnel.StatusCancelled {
			res.StopReason = runnel.StopCancelled
		}
	}
	fixResult(res, id)
	return res, err != nil
}

// finishStream logs a stream that did not reach its client, or lifts the
// write deadline so the connection may serve another request.
func (s *Server) finishStream(w http.ResponseWriter, r *http.Request, err error) {
	if err != nil {
		s.log.DebugContext(r.Context(), "stream not fully delivered", slog.String("requestId", requestIDOf(r)), slog.Any("err", err))
		return
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
}

// errClientGone is the cause of a run cancelled because its client stopped
// reading its stream.
var errClientGone = errors.New("the client stopped reading the stream")
