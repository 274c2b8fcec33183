package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/runnel/runnel"
)

// The documented defaults of Policy.
const (
	defaultAttempts    = 3
	defaultBaseBackoff = 500 * time.Millisecond
	defaultMaxBackoff  = 30 * time.Second
)

// WithPolicy wraps m with retries and deadlines.
//
// A failed attempt is retried, after an exponential backoff (or the
// server's Retry-After, both capped by MaxBackoff), only when its error is
// a retryable *Error or a first-token timeout and the attempt emitted no
// chunk: once a chunk reached the caller a retry would repeat it; and only
// when the wait ends before ctx's deadline, otherwise the failure is final
// at once, saying how long the retry would have waited. Every
// final failure is a *runnel.Error: CodeTimeout for a deadline of the
// policy, CodeProviderError (wrapping the *Error) for everything else. When
// ctx itself ends, Stream returns context.Cause(ctx) unchanged.
//
// The first chunk must arrive within FirstTokenTimeout, or within
// IdleTimeout when FirstTokenTimeout is zero (silence before the first
// chunk is still silence); later chunks within IdleTimeout of the previous
// one. The time emit spends in the caller does not count as silence.
func WithPolicy(m Model, p Policy) Model {
	if p.Attempts == 0 {
		p.Attempts = defaultAttempts
	}
	p.Attempts = max(p.Attempts, 1)
	if p.BaseBackoff <= 0 {
		p.BaseBackoff = defaultBaseBackoff
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = defaultMaxBackoff
	}
	return &policyModel{m: m, p: p}
}

type policyModel struct {
	m Model
	p Policy
}

// silence is the cause an attempt is cancelled with when the model goes
// quiet for too long.
type silence struct {
	d     time.Duration
	first bool // before the first chunk, so nothing was emitted
}

func (s *silence) Error() string {
	what := "idle timeout"
	if s.first {
		what = "first-token timeout"
	}
	return fmt.Sprintf("the model sent nothing for %s (%s)", s.d, what)
}

func (pm *policyModel) Stream(ctx context.Context, req *Request, emit func(Chunk)) (*Response, error) {
	for attempt := 1; ; attempt++ {
		resp, emitted, err := pm.attempt(ctx, req, emit)
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		wait, retry := pm.retryAfter(err, emitted, attempt)
		if !retry {
			return nil, pm.final(err, attempt)
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= wait {
			// The retry would start after ctx ends: fail now, with what
			// went wrong, instead of sleeping into a deadline that would
			// only say time ran out.
			return nil, pm.tooLate(err, attempt, wait)
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// attempt runs one model call under the policy's deadlines. emitted
// reports whether any chunk reached the caller.
func (pm *policyModel) attempt(ctx context.Context, req *Request, emit func(Chunk)) (resp *Response, emitted bool, err error) {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	first := pm.p.FirstTokenTimeout
	if first <= 0 {
		first = pm.p.IdleTimeout
	}
	idle := pm.p.IdleTimeout
	firstCause := &silence{d: first, first: true}
	idleCause := &silence{d: idle}
	// The timer goroutine only reads which phase we are in; the chunk path
	// writes it, hence the atomic.
	var afterFirst atomic.Bool
	var timer *time.Timer
	if first > 0 {
		timer = time.AfterFunc(first, func() {
			if afterFirst.Load() {
				cancel(idleCause)
			} else {
				cancel(firstCause)
			}
		})
		defer timer.Stop()
	}

	resp, err = pm.m.Stream(actx, req, func(c Chunk) {
		if actx.Err() != nil {
			// The attempt is already abandoned; a chunk forwarded now would
			// make a retry repeat it.
			return
		}
		if timer != nil {
			timer.Stop()
		}
		emitted = true
		afterFirst.Store(true)
		emit(c)
		if timer != nil && idle > 0 {
			timer.Reset(idle)
		}
	})
	if err == nil {
		return resp, emitted, nil
	}
	var s *silence
	if ctx.Err() == nil && errors.As(context.Cause(actx), &s) {
		return nil, emitted, s
	}
	return nil, emitted, err
}

// retryAfter decides whether a failed attempt is tried again and how long
// to wait first.
func (pm *policyModel) retryAfter(err error, emitted bool, attempt int) (time.Duration, bool) {
	if emitted || attempt >= pm.p.Attempts {
		return 0, false
	}
	var s *silence
	if errors.As(err, &s) {
		return pm.backoff(attempt), s.first
	}
	var pe *Error
	if !errors.As(err, &pe) || !pe.Retryable {
		return 0, false
	}
	if pe.RetryAfter > 0 {
		return min(pe.RetryAfter, pm.p.MaxBackoff), true
	}
	return pm.backoff(attempt), true
}

// backoff is the wait after the given failed attempt: BaseBackoff doubled
// per earlier retry, capped by MaxBackoff.
func (pm *policyModel) backoff(attempt int) time.Duration {
	d := pm.p.BaseBackoff
	for i := 1; i < attempt && d < pm.p.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, pm.p.MaxBackoff)
}

// final turns the last attempt's error into the *runnel.Error the caller
// sees.
func (pm *policyModel) final(err error, attempts int) error {
	tries := "after 1 attempt"
	if attempts > 1 {
		tries = fmt.Sprintf("after %d attempts", attempts)
	}
	var s *silence
	if errors.As(err, &s) {
		return &runnel.Error{Code: runnel.CodeTimeout, Message: fmt.Sprintf("%s, %s", s.Error(), tries), Err: s}
	}
	var re *runnel.Error
	if errors.As(err, &re) {
		return err
	}
	var pe *Error
	if errors.As(err, &pe) {
		return &runnel.Error{Code: runnel.CodeProviderError, Message: fmt.Sprintf("%s (%s)", pe.Message, tries), Err: pe}
	}
	return &runnel.Error{Code: runnel.CodeProviderError, Message: fmt.Sprintf("the model call failed (%s)", tries), Err: err}
}

// tooLate is final's error for a failure whose retry, after wait, would
// come past the caller's deadline.
func (pm *policyModel) tooLate(err error, attempts int, wait time.Duration) error {
	err = pm.final(err, attempts)
	var re *runnel.Error
	if errors.As(err, &re) {
		re2 := *re
		re2.Message = fmt.Sprintf("%s; the next attempt would have waited %s, past the run's deadline", re.Message, wait)
		return &re2
	}
	return err
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// The helpers below are for adapters: they build the *Error values whose
// Retryable and RetryAfter fields WithPolicy acts on, so every adapter
// classifies failures the same way.

// HTTPError is the error for an HTTP error response of api (a short name
// such as "openai chat completions"). detail is the API's own message, if
// any; the caller must have removed secrets from it.
func HTTPError(api string, status int, h http.Header, detail string) *Error {
	msg := fmt.Sprintf("%s: HTTP %d", api, status)
	if detail = strings.TrimSpace(detail); detail != "" {
		msg += ": " + detail
	} else if t := http.StatusText(status); t != "" {
		msg += " " + t
	}
	retryable := status == http.StatusRequestTimeout || status == http.StatusConflict ||
		status == http.StatusTooManyRequests || status >= 500
	// Both vendors send x-should-retry to overrule the status.
	switch h.Get("X-Should-Retry") {
	case "true":
		retryable = true
	case "false":
		retryable = false
	}
	return &Error{Status: status, RetryAfter: RetryAfter(h, time.Now()), Retryable: retryable, Message: msg}
}

// ConnError is the error for a request that got no HTTP response. Refused
// and reset connections, an early EOF and network timeouts are retryable;
// a bad URL, a failed DNS lookup or a TLS failure is not.
func ConnError(api string, err error) *Error {
	// A *url.Error's text carries the request URL, which may carry
	// credentials in its query; keep only the underlying error.
	cause := err
	var ue *url.Error
	if errors.As(err, &ue) {
		cause = ue.Err
	}
	return &Error{
		Retryable: transient(err),
		Message:   fmt.Sprintf("%s: the request failed: %v", api, cause),
		Err:       err,
	}
}

// StreamError is the error for a response stream that failed after the
// HTTP status arrived: cut, malformed, or ended without its terminating
// event. It is retryable only when nothing was emitted yet.
func StreamError(api string, emitted bool, err error, format string, args ...any) *Error {
	return &Error{
		Status:    http.StatusOK,
		Retryable: !emitted,
		Message:   api + ": " + fmt.Sprintf(format, args...),
		Err:       err,
	}
}

func transient(err error) bool {
	var ne net.Error
	var dns *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return true
	case errors.As(err, &dns):
		return dns.IsTemporary || dns.IsTimeout
	case errors.As(err, &ne):
		return ne.Timeout()
	}
	return false
}

// RetryAfter reads the server's requested wait from retry-after-ms
// (milliseconds, possibly fractional) or Retry-After (seconds or an HTTP
// date relative to now). It returns 0 when neither is present or valid.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > 0 {
			return time.Duration(s * float64(time.Second))
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
