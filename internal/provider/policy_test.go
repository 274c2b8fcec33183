package provider_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/provider"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// script is a fake model whose attempt i (from 0) runs steps[i], recording
// when each attempt started relative to the test's start.
type script struct {
	start  time.Time
	starts []time.Duration
	steps  []func(ctx context.Context, emit func(provider.Chunk)) (*provider.Response, error)
}

func (s *script) Stream(ctx context.Context, _ *provider.Request, emit func(provider.Chunk)) (*provider.Response, error) {
	n := len(s.starts)
	s.starts = append(s.starts, time.Since(s.start))
	return s.steps[n](ctx, emit)
}

func newScript(steps ...func(ctx context.Context, emit func(provider.Chunk)) (*provider.Response, error)) *script {
	return &script{start: time.Now(), steps: steps}
}

var okResp = &provider.Response{StopReason: "end_turn"}

func fail(e *provider.Error) func(context.Context, func(provider.Chunk)) (*provider.Response, error) {
	return func(context.Context, func(provider.Chunk)) (*provider.Response, error) { return nil, e }
}

func succeed(chunks ...string) func(context.Context, func(provider.Chunk)) (*provider.Response, error) {
	return func(_ context.Context, emit func(provider.Chunk)) (*provider.Response, error) {
		for _, c := range chunks {
			emit(provider.Chunk{Kind: provider.ChunkText, Text: c})
		}
		return okResp, nil
	}
}

// hang waits for the attempt to be cancelled, as a silent model would.
func hang(ctx context.Context, _ func(provider.Chunk)) (*provider.Response, error) {
	<-ctx.Done()
	return nil, context.Cause(ctx)
}

func retryable(status int) *provider.Error {
	return &provider.Error{Status: status, Retryable: true, Message: "fake: HTTP " + http.StatusText(status)}
}

// outcome is what a test compares: the attempts' start times, the chunks
// the caller saw, and the error's code and message.
type outcome struct {
	Starts  []time.Duration
	Chunks  []string
	Code    runnel.ErrorCode
	Message string
}

func run(t *testing.T, s *script, p provider.Policy) (outcome, error) {
	t.Helper()
	var o outcome
	resp, err := provider.WithPolicy(s, p).Stream(t.Context(), &provider.Request{}, func(c provider.Chunk) {
		o.Chunks = append(o.Chunks, c.Text)
	})
	o.Starts = s.starts
	if err == nil && resp != okResp {
		t.Fatalf("response = %v, want the model's", resp)
	}
	if err != nil {
		o.Code, o.Message = runnel.ErrorCodeOf(err), err.Error()
	}
	return o, err
}

func TestPolicyRetries(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy provider.Policy
		steps  []func(context.Context, func(provider.Chunk)) (*provider.Response, error)
		want   outcome
	}{{
		name:  "backoff doubles from the default 500ms",
		steps: []func(context.Context, func(provider.Chunk)) (*provider.Response, error){fail(retryable(503)), fail(retryable(502)), succeed("hi")},
		want:  outcome{Starts: []time.Duration{0, 500 * time.Millisecond, 1500 * time.Millisecond}, Chunks: []string{"hi"}},
	}, {
		name:   "backoff is capped by MaxBackoff",
		policy: provider.Policy{Attempts: 4, BaseBackoff: 2 * time.Second, MaxBackoff: 3 * time.Second},
		steps:  []func(context.Context, func(provider.Chunk)) (*provider.Response, error){fail(retryable(500)), fail(retryable(500)), fail(retryable(500)), succeed()},
		want:   outcome{Starts: []time.Duration{0, 2 * time.Second, 5 * time.Second, 8 * time.Second}},
	}, {
		name:   "Retry-After wins over the backoff, capped by MaxBackoff",
		policy: provider.Policy{MaxBackoff: 10 * time.Second},
		steps: []func(context.Context, func(provider.Chunk)) (*provider.Response, error){
			fail(&provider.Error{Status: 429, Retryable: true, RetryAfter: 7 * time.Second, Message: "fake: HTTP 429"}),
			fail(&provider.Error{Status: 429, Retryable: true, RetryAfter: time.Hour, Message: "fake: HTTP 429"}),
			succeed(),
		},
		want: outcome{Starts: []time.Duration{0, 7 * time.Second, 17 * time.Second}},
	}, {
		name:  "attempts run out",
		steps: []func(context.Context, func(provider.Chunk)) (*provider.Response, error){fail(retryable(500)), fail(retryable(500)), fail(retryable(500))},
		want: outcome{
			Starts: []time.Duration{0, 500 * time.Millisecond, 1500 * time.Millisecond},
			Code:   runnel.CodeProviderError, Message: "fake: HTTP Internal Server Error (after 3 attempts)",
		},
	}, {
		name:  "a non-retryable error is final",
		steps: []func(context.Context, func(provider.Chunk)) (*provider.Response, error){fail(&provider.Error{Status: 401, Message: "fake: HTTP 401: bad key"})},
		want:  outcome{Starts: []time.Duration{0}, Code: runnel.CodeProviderError, Message: "fake: HTTP 401: bad key (after 1 attempt)"},
	}, {
		name: "no retry once a chunk was emitted",
		steps: []func(context.Context, func(provider.Chunk)) (*provider.Response, error){
			func(_ context.Context, emit func(provider.Chunk)) (*provider.Response, error) {
				emit(provider.Chunk{Kind: provider.ChunkText, Text: "par"})
				return nil, retryable(502)
			},
		},
		want: outcome{Starts: []time.Duration{0}, Chunks: []string{"par"}, Code: runnel.CodeProviderError, Message: "fake: HTTP Bad Gateway (after 1 attempt)"},
	}, {
		name:   "Attempts 1 never retries",
		policy: provider.Policy{Attempts: 1},
		steps:  []func(context.Context, func(provider.Chunk)) (*provider.Response, error){fail(retryable(429))},
		want:   outcome{Starts: []time.Duration{0}, Code: runnel.CodeProviderError, Message: "fake: HTTP Too Many Requests (after 1 attempt)"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				got, err := run(t, newScript(tc.steps...), tc.policy)
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("outcome (-want +got):\n%s", diff)
				}
				var pe *provider.Error
				if err != nil && !errors.As(err, &pe) {
					t.Errorf("error %v does not wrap the *provider.Error", err)
				}
			})
		})
	}
}

func TestPolicyDeadlines(t *testing.T) {
	// drip emits n chunks, one every gap, then succeeds.
	drip := func(n int, gap time.Duration) func(context.Context, func(provider.Chunk)) (*provider.Response, error) {
		return func(ctx context.Context, emit func(provider.Chunk)) (*provider.Response, error) {
			for range n {
				select {
				case <-ctx.Done():
					return nil, context.Cause(ctx)
				case <-time.After(gap):
				}
				emit(provider.Chunk{Kind: provider.ChunkText, Text: "."})
			}
			return okResp, nil
		}
	}
	// late waits for its cancellation and then emits anyway, as an adapter
	// might with a chunk already decoded.
	late := func(ctx context.Context, emit func(provider.Chunk)) (*provider.Response, error) {
		<-ctx.Done()
		emit(provider.Chunk{Kind: provider.ChunkText, Text: "stale"})
		return nil, context.Cause(ctx)
	}
	for _, tc := range []struct {
		name   string
		policy provider.Policy
		steps  []func(context.Context, func(provider.Chunk)) (*provider.Response, error)
		want   outcome
	}{{
		name:   "first-token timeout is retried",
		policy: provider.Policy{FirstTokenTimeout: 30 * time.Second},
		steps:  []func(context.Context, func(provider.Chunk)) (*provider.Response, error){hang, succeed("ok")},
		want:   outcome{Starts: []time.Duration{0, 30*time.Second + 500*time.Millisecond}, Chunks: []string{"ok"}},
	}, {
		name:   "first-token timeouts run out",
		policy: provider.Policy{Attempts: 2, FirstTokenTimeout: 30 * time.Second, IdleTimeout: time.Second},
		steps:  []func(context.Context, func(provider.Chunk)) (*provider.Response, error){hang, hang},
		want: outcome{
			Starts: []time.Duration{0, 30*time.Second + 500*time.Millisecond},
			Code:   runnel.CodeTimeout, Message: "the model sent nothing for 30s (first-token timeout), after 2 attempts",
		},
	}, {
		name:   "IdleTimeout bounds the first chunk when FirstTokenTimeout is unset",
		policy: provider.Policy{Attempts: 1, IdleTimeout: 10 * time.Second},
		steps:  []func(context.Context, func(provider.Chunk)) (*provider.Response, error){hang},
		want:   outcome{Starts: []time.Duration{0}, Code: runnel.CodeTimeout, Message: "the model sent nothing for 10s (first-token timeout), after 1 attempt"},
	}, {
		name:   "idle timeout after a chunk is final",
		policy: provider.Policy{IdleTimeout: 30 * time.Second},
		steps: []func(context.Context, func(provider.Chunk)) (*provider.Response, error){
			func(ctx context.Context, emit func(provider.Chunk)) (*provider.Response, error) {
				emit(provider.Chunk{Kind: provider.ChunkText, Text: "a"})
				return hang(ctx, emit)
			},
		},
		want: outcome{Starts: []time.Duration{0}, Chunks: []string{"a"}, Code: runnel.CodeTimeout, Message: "the model sent nothing for 30s (idle timeout), after 1 attempt"},
	}, {
		name:   "each chunk resets the idle timer",
		policy: provider.Policy{FirstTokenTimeout: 30 * time.Second, IdleTimeout: 30 * time.Second},
		steps:  []func(context.Context, func(provider.Chunk)) (*provider.Response, error){drip(5, 20*time.Second)},
		want:   outcome{Starts: []time.Duration{0}, Chunks: []string{".", ".", ".", ".", "."}},
	}, {
		name:   "a chunk after the deadline is dropped and the attempt retried",
		policy: provider.Policy{FirstTokenTimeout: 5 * time.Second},
		steps:  []func(context.Context, func(provider.Chunk)) (*provider.Response, error){late, succeed("fresh")},
		want:   outcome{Starts: []time.Duration{0, 5*time.Second + 500*time.Millisecond}, Chunks: []string{"fresh"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				got, _ := run(t, newScript(tc.steps...), tc.policy)
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("outcome (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// A retry that could only start after the caller's deadline is not waited
// for: the failure is final at once, with what went wrong, rather than a
// deadline that says only that time ran out.
func TestPolicyRetryPastTheDeadline(t *testing.T) {
	rateLimited := func(after time.Duration) func(context.Context, func(provider.Chunk)) (*provider.Response, error) {
		return fail(&provider.Error{Status: 429, Retryable: true, RetryAfter: after, Message: "fake: HTTP 429"})
	}
	for _, tc := range []struct {
		name  string
		steps []func(context.Context, func(provider.Chunk)) (*provider.Response, error)
		want  outcome
	}{{
		name:  "Retry-After past the deadline",
		steps: []func(context.Context, func(provider.Chunk)) (*provider.Response, error){rateLimited(20 * time.Second), succeed()},
		want: outcome{Starts: []time.Duration{0}, Code: runnel.CodeProviderError,
			Message: "fake: HTTP 429 (after 1 attempt); the next attempt would have waited 20s, past the run's deadline"},
	}, {
		name:  "a backoff past the deadline",
		steps: []func(context.Context, func(provider.Chunk)) (*provider.Response, error){fail(retryable(503)), fail(retryable(503)), succeed()},
		want: outcome{Starts: []time.Duration{0, 8 * time.Second}, Code: runnel.CodeProviderError,
			Message: "fake: HTTP Service Unavailable (after 2 attempts); the next attempt would have waited 16s, past the run's deadline"},
	}, {
		name:  "Retry-After within the deadline",
		steps: []func(context.Context, func(provider.Chunk)) (*provider.Response, error){rateLimited(9 * time.Second), succeed("ok")},
		want:  outcome{Starts: []time.Duration{0, 9 * time.Second}, Chunks: []string{"ok"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				defer cancel()
				s := newScript(tc.steps...)
				var got outcome
				_, err := provider.WithPolicy(s, provider.Policy{BaseBackoff: 8 * time.Second}).Stream(ctx, &provider.Request{}, func(c provider.Chunk) {
					got.Chunks = append(got.Chunks, c.Text)
				})
				got.Starts = s.starts
				if err != nil {
					got.Code, got.Message = runnel.ErrorCodeOf(err), err.Error()
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("outcome (-want +got):\n%s", diff)
				}
				var pe *provider.Error
				if err != nil && !errors.As(err, &pe) {
					t.Errorf("error %v does not wrap the *provider.Error", err)
				}
			})
		})
	}
}

// The time the caller spends in emit is not the model's silence.
func TestPolicySlowConsumerIsNotIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// careful fails as soon as its attempt is cancelled.
		careful := func(ctx context.Context, emit func(provider.Chunk)) (*provider.Response, error) {
			for _, c := range []string{"a", "b", "c"} {
				emit(provider.Chunk{Kind: provider.ChunkText, Text: c})
				if ctx.Err() != nil {
					return nil, context.Cause(ctx)
				}
			}
			return okResp, nil
		}
		m := provider.WithPolicy(newScript(careful), provider.Policy{Attempts: 1, IdleTimeout: time.Second, FirstTokenTimeout: time.Second})
		var got []string
		_, err := m.Stream(t.Context(), &provider.Request{}, func(c provider.Chunk) {
			time.Sleep(time.Minute)
			got = append(got, c.Text)
		})
		if err != nil {
			t.Fatalf("Stream: %v", err)
		}
		if diff := cmp.Diff([]string{"a", "b", "c"}, got); diff != "" {
			t.Errorf("chunks (-want +got):\n%s", diff)
		}
	})
}

func TestPolicyParentCancellation(t *testing.T) {
	errStop := errors.New("run stopped")
	for _, tc := range []struct {
		name  string
		steps []func(context.Context, func(provider.Chunk)) (*provider.Response, error)
	}{
		{"during an attempt", []func(context.Context, func(provider.Chunk)) (*provider.Response, error){hang}},
		{"during the backoff", []func(context.Context, func(provider.Chunk)) (*provider.Response, error){fail(retryable(503)), succeed()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancelCause(t.Context())
				s := newScript(tc.steps...)
				done := make(chan error)
				go func() {
					_, err := provider.WithPolicy(s, provider.Policy{IdleTimeout: time.Hour}).Stream(ctx, &provider.Request{}, func(provider.Chunk) {})
					done <- err
				}()
				synctest.Wait() // the attempt hangs, or the backoff sleeps
				cancel(errStop)
				if err := <-done; err != errStop {
					t.Errorf("Stream = %v, want the context's cause unchanged", err)
				}
				if len(s.starts) != 1 {
					t.Errorf("attempts = %d, want 1", len(s.starts))
				}
			})
		})
	}
	t.Run("plain cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := provider.WithPolicy(newScript(hang), provider.Policy{}).Stream(ctx, &provider.Request{}, func(provider.Chunk) {})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Stream = %v, want context.Canceled", err)
		}
	})
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		header http.Header
		want   time.Duration
	}{
		{"none", http.Header{}, 0},
		{"seconds", http.Header{"Retry-After": {"7"}}, 7 * time.Second},
		{"fractional seconds", http.Header{"Retry-After": {"1.5"}}, 1500 * time.Millisecond},
		{"HTTP date", http.Header{"Retry-After": {now.Add(90 * time.Second).Format(http.TimeFormat)}}, 90 * time.Second},
		{"date in the past", http.Header{"Retry-After": {now.Add(-time.Minute).Format(http.TimeFormat)}}, 0},
		{"milliseconds win", http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"7"}}, 250 * time.Millisecond},
		{"garbage", http.Header{"Retry-After": {"soon"}}, 0},
		{"negative", http.Header{"Retry-After": {"-3"}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := provider.RetryAfter(tc.header, now); got != tc.want {
				t.Errorf("RetryAfter = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestHTTPError(t *testing.T) {
	for _, tc := range []struct {
		status int
		header http.Header
		detail string
		want   provider.Error
	}{
		{400, nil, "bad model", provider.Error{Status: 400, Message: "api: HTTP 400: bad model"}},
		{401, nil, "", provider.Error{Status: 401, Message: "api: HTTP 401 Unauthorized"}},
		{408, nil, "", provider.Error{Status: 408, Retryable: true, Message: "api: HTTP 408 Request Timeout"}},
		{409, nil, "", provider.Error{Status: 409, Retryable: true, Message: "api: HTTP 409 Conflict"}},
		{429, http.Header{"Retry-After": {"3"}}, "slow down", provider.Error{Status: 429, Retryable: true, RetryAfter: 3 * time.Second, Message: "api: HTTP 429: slow down"}},
		{529, nil, "Overloaded", provider.Error{Status: 529, Retryable: true, Message: "api: HTTP 529: Overloaded"}},
		{500, http.Header{"X-Should-Retry": {"false"}}, "", provider.Error{Status: 500, Message: "api: HTTP 500 Internal Server Error"}},
		{400, http.Header{"X-Should-Retry": {"true"}}, "", provider.Error{Status: 400, Retryable: true, Message: "api: HTTP 400 Bad Request"}},
	} {
		got := provider.HTTPError("api", tc.status, tc.header, tc.detail)
		if diff := cmp.Diff(&tc.want, got); diff != "" {
			t.Errorf("HTTPError(%d) (-want +got):\n%s", tc.status, diff)
		}
	}
}

func TestConnError(t *testing.T) {
	// A port that was just closed refuses connections.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = http.Get("http://" + addr + "/v1/chat?key=s3cr3t")
	if err == nil {
		t.Fatal("request to a closed port succeeded")
	}
	e := provider.ConnError("api", err)
	if !e.Retryable || e.Status != 0 {
		t.Errorf("refused connection: Retryable=%v Status=%d, want retryable with no status", e.Retryable, e.Status)
	}
	if strings.Contains(e.Message, "s3cr3t") || !strings.HasPrefix(e.Message, "api: the request failed: ") {
		t.Errorf("message %q: want the failure without the request URL", e.Message)
	}

	bad := provider.ConnError("api", &url.Error{Op: "Post", URL: "http://x", Err: errors.New("tls: failed to verify certificate")})
	if bad.Retryable {
		t.Errorf("a TLS failure is retryable")
	}
}
