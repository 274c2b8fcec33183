package server

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/runnel/runnel"
)

// Routing failures have no domain code in the root package; these exist
// only on the HTTP wire.
const (
	codeNotFound         runnel.ErrorCode = "not_found"
	codeMethodNotAllowed runnel.ErrorCode = "method_not_allowed"
	codeUnsupportedMedia runnel.ErrorCode = "unsupported_media_type"
)

// statusForCode is the one table from error codes to HTTP statuses
// (DESIGN §3.3). A cancelled run is 503: the caller went away or the server
// is shutting down, and either way another replica may take the retry.
func statusForCode(code runnel.ErrorCode) int {
	switch code {
	case "":
		return http.StatusOK
	case runnel.CodeInvalidRequest, runnel.CodeRefused:
		return http.StatusBadRequest
	case runnel.CodeUnauthorized:
		return http.StatusUnauthorized
	case codeNotFound:
		return http.StatusNotFound
	case codeUnsupportedMedia:
		return http.StatusUnsupportedMediaType
	case codeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case runnel.CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case runnel.CodeAtCapacity:
		return http.StatusTooManyRequests
	case runnel.CodeCancelled:
		return http.StatusServiceUnavailable
	case runnel.CodeUnavailable, runnel.CodeAgentError:
		return http.StatusBadGateway
	default:
		return http.StatusInternalServerError
	}
}

// StatusOf returns the HTTP status of a one-shot answer carrying res: 200
// when res.OK (a paused turn included), otherwise the status of its error
// code; a failure without a code is 500, a cancellation without one 503.
func StatusOf(res *runnel.Result) int {
	if res.OK {
		return http.StatusOK
	}
	code := res.ErrorCode
	if code == "" {
		code = runnel.CodeInternal
		if res.Status == runnel.StatusCancelled {
			code = runnel.CodeCancelled
		}
	}
	return statusForCode(code)
}

// ErrorResponse maps err to what a caller sees: the HTTP status and a body
// shaped like a Result (ok=false, status "failed", the sentence and the
// code). Anything that is not a *runnel.Error with a caller-facing code is
// shown as "internal error (request <id>)" and nothing of err itself; the
// caller of ErrorResponse logs err with that id.
func ErrorResponse(err error, requestID string) (int, *runnel.Result) {
	code := runnel.ErrorCodeOf(err)
	msg := runnel.ErrorMessage(err)
	if code == runnel.CodeInternal {
		msg = internalMessage(requestID)
	}
	status := runnel.StatusFailed
	if code == runnel.CodeCancelled {
		status = runnel.StatusCancelled
	}
	return statusForCode(code), &runnel.Result{
		OK: false, Status: status, Messages: []runnel.Message{}, Interactions: []runnel.Interaction{},
		Error: msg, ErrorCode: code, RequestID: requestID,
	}
}

func internalMessage(requestID string) string {
	if requestID == "" {
		return "internal error"
	}
	return fmt.Sprintf("internal error (request %s)", requestID)
}

// writeError answers r with err; internal errors are logged with the
// request id the caller is shown. Every refusal, here or inside a stream,
// passes logError, which counts it.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	id := requestIDOf(r)
	status, body := ErrorResponse(err, id)
	s.logError(r, id, err)
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="runnel"`)
	}
	s.writeJSON(w, r, status, body)
}

func (s *Server) logError(r *http.Request, id string, err error) {
	if s.opts.Refused != nil {
		s.opts.Refused(string(runnel.ErrorCodeOf(err)))
	}
	if runnel.ErrorCodeOf(err) == runnel.CodeInternal {
		s.log.ErrorContext(r.Context(), "internal error", slog.String("requestId", id), slog.Any("err", err))
		return
	}
	s.log.DebugContext(r.Context(), "request refused", slog.String("requestId", id),
		slog.String("errorCode", string(runnel.ErrorCodeOf(err))), slog.String("error", runnel.ErrorMessage(err)))
}

// fixResult completes a runner's result for the caller: it carries the
// request id, and an internal failure points at the log line by that id.
func fixResult(res *runnel.Result, requestID string) {
	if res.RequestID == "" {
		res.RequestID = requestID
	}
	if !res.OK && res.ErrorCode == runnel.CodeInternal && (res.Error == "" || res.Error == "internal error") {
		res.Error = internalMessage(res.RequestID)
	}
}
