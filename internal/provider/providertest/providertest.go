// Package providertest holds what every provider adapter's tests share:
// the scripted model server wired to a config, and the failure behaviour
// each adapter must have (retries, deadlines, broken streams,
// cancellation), checked over a real socket against internal/llmtest.
//
//	func TestFailures(t *testing.T) {
//		providertest.Failures(t, providertest.Adapter{New: anthropic.New, Model: "claude-test"})
//	}
package providertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/llmtest"
	"github.com/runnel/runnel/internal/provider"
)

// Key is the API key the tests send; no error may carry it.
const Key = "sk-test-key-0123456789"

// Adapter is one provider adapter as the shared tests drive it.
type Adapter struct {
	New func(provider.Config) provider.Model
	// BasePath is appended to the server's URL for Config.BaseURL ("/v1"
	// for the OpenAI APIs).
	BasePath string
	// Model is the request's model id.
	Model string
}

// Serve starts the fake model server with rules and returns it with a
// config that reaches it through a transport of the test's own, closed at
// the end so no connection goroutine outlives the test.
func (a Adapter) Serve(t *testing.T, rules ...llmtest.Rule) (*llmtest.Server, provider.Config) {
	t.Helper()
	srv := llmtest.NewServer(llmtest.Script{Rules: rules})
	t.Cleanup(srv.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return srv, provider.Config{BaseURL: srv.URL + a.BasePath, APIKey: Key, HTTPClient: &http.Client{Transport: tr}}
}

// Hello is a request of one user message.
func (a Adapter) Hello(text string) *provider.Request {
	return &provider.Request{Model: a.Model, Messages: []runnel.Message{runnel.UserText(text)}}
}

// Stream calls m and collects what it emitted.
func Stream(t *testing.T, m provider.Model, req *provider.Request) ([]provider.Chunk, *provider.Response, error) {
	t.Helper()
	var chunks []provider.Chunk
	resp, err := m.Stream(t.Context(), req, func(c provider.Chunk) { chunks = append(chunks, c) })
	return chunks, resp, err
}

// TextAndUsage checks what every adapter does with a plain answer: text
// deltas as chunks in the order streamed, the whole text, usage with its
// total, and end_turn. It returns the server, so a caller can check the
// request its adapter sent.
func (a Adapter) TextAndUsage(t *testing.T) *llmtest.Server {
	t.Helper()
	srv, cfg := a.Serve(t, llmtest.Rule{Reply: llmtest.Reply{Text: "Hello, world!", ChunkSize: 5, Usage: &llmtest.Usage{Input: 12, Output: 7}}})
	chunks, resp, err := Stream(t, a.New(cfg), a.Hello("hi"))
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	wantChunks := []provider.Chunk{
		{Kind: provider.ChunkText, Text: "Hello"},
		{Kind: provider.ChunkText, Text: ", wor"},
		{Kind: provider.ChunkText, Text: "ld!"},
	}
	if diff := cmp.Diff(wantChunks, chunks); diff != "" {
		t.Errorf("chunks (-want +got):\n%s", diff)
	}
	want := &provider.Response{
		Content:    []runnel.Block{{Type: runnel.BlockText, Text: "Hello, world!"}},
		Usage:      runnel.Usage{Input: 12, Output: 7, Total: 19},
		StopReason: "end_turn",
	}
	if diff := cmp.Diff(want, resp); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	return srv
}

// Failures runs the failure cases every adapter shares, each as a subtest.
// The faults that strike mid-stream do so at event 8, which lies among the
// text deltas of every API (after chat's role chunk, Responses' four
// opening events, and Anthropic's message_start, ping and
// content_block_start).
func Failures(t *testing.T, a Adapter) {
	t.Run("429 with Retry-After", a.retryAfter)
	for _, status := range []int{500, 529} {
		t.Run(fmt.Sprintf("HTTP %d exhausts attempts", status), func(t *testing.T) { a.serverError(t, status) })
	}
	t.Run("401 is not retried", a.unauthorized)
	t.Run("broken streams", a.brokenStreams)
	t.Run("timeouts", a.timeouts)
	t.Run("context cancelled", a.contextCancel)
	t.Run("connection refused", a.connectionRefused)
}

func (a Adapter) retryAfter(t *testing.T) {
	srv, cfg := a.Serve(t, llmtest.Rule{
		Reply: llmtest.Reply{Text: "finally"},
		Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 429, RetryAfter: "7", Times: 2},
	})
	// Unwrapped, the adapter reports what the policy needs.
	_, _, err := Stream(t, a.New(cfg), a.Hello("hi"))
	var pe *provider.Error
	if !errors.As(err, &pe) {
		t.Fatalf("Stream = %v, want a *provider.Error", err)
	}
	if pe.Status != 429 || !pe.Retryable || pe.RetryAfter != 7*time.Second {
		t.Errorf("error: status %d, retryable %v, retry after %v; want 429, true, 7s", pe.Status, pe.Retryable, pe.RetryAfter)
	}
	if !strings.Contains(pe.Message, "HTTP 429: llmtest: scripted 429") {
		t.Errorf("message %q does not carry the status and the API's message", pe.Message)
	}
	// Wrapped, the second 429 is waited out (capped far below 7s) and retried.
	m := provider.WithPolicy(a.New(cfg), provider.Policy{MaxBackoff: time.Millisecond})
	chunks, resp, err := Stream(t, m, a.Hello("hi"))
	if err != nil {
		t.Fatalf("Stream with policy: %v", err)
	}
	if len(srv.Requests()) != 3 || resp.Content[0].Text != "finally" || len(chunks) == 0 {
		t.Errorf("requests %d, content %v; want 3 requests and the reply", len(srv.Requests()), resp.Content)
	}
}

func (a Adapter) serverError(t *testing.T, status int) {
	srv, cfg := a.Serve(t, llmtest.Rule{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: status}})
	m := provider.WithPolicy(a.New(cfg), provider.Policy{Attempts: 3, BaseBackoff: time.Millisecond})
	_, _, err := Stream(t, m, a.Hello("hi"))
	if code := runnel.ErrorCodeOf(err); code != runnel.CodeProviderError {
		t.Fatalf("error code %q (%v), want provider_error", code, err)
	}
	if msg := err.Error(); !strings.Contains(msg, fmt.Sprintf("HTTP %d", status)) || !strings.HasSuffix(msg, "(after 3 attempts)") {
		t.Errorf("message %q: want the status and the attempts", msg)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("requests = %d, want 3", n)
	}
}

func (a Adapter) unauthorized(t *testing.T) {
	srv, cfg := a.Serve(t, llmtest.Rule{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 401}})
	_, _, err := Stream(t, provider.WithPolicy(a.New(cfg), provider.Policy{BaseBackoff: time.Millisecond}), a.Hello("hi"))
	if runnel.ErrorCodeOf(err) != runnel.CodeProviderError || len(srv.Requests()) != 1 {
		t.Fatalf("error %v after %d requests; want provider_error after 1", err, len(srv.Requests()))
	}
	if strings.Contains(err.Error(), Key) {
		t.Error("the error message carries the API key")
	}
}

func (a Adapter) brokenStreams(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fault    llmtest.Fault
		requests int // what the server saw: a fault before any chunk is retried
		wantErr  string
	}{
		{"cut mid-way", llmtest.Fault{Kind: llmtest.FaultCut, AfterChunks: 8}, 1, "the stream broke off"},
		{"malformed chunk", llmtest.Fault{Kind: llmtest.FaultMalformed, AfterChunks: 8}, 1, "malformed"},
		{"cut before the response", llmtest.Fault{Kind: llmtest.FaultCut, Times: 1}, 2, ""},
		{"cut after the headers", llmtest.Fault{Kind: llmtest.FaultCut, FlushHeaders: true, Times: 1}, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, cfg := a.Serve(t, llmtest.Rule{Reply: llmtest.Reply{Text: "a long enough answer", ChunkSize: 2}, Fault: &tc.fault})
			_, resp, err := Stream(t, provider.WithPolicy(a.New(cfg), provider.Policy{BaseBackoff: time.Millisecond}), a.Hello("hi"))
			if n := len(srv.Requests()); n != tc.requests {
				t.Errorf("requests = %d, want %d", n, tc.requests)
			}
			if tc.wantErr == "" {
				if err != nil || resp.Content[0].Text != "a long enough answer" {
					t.Errorf("Stream = %v, %v; want the retried answer", resp, err)
				}
				return
			}
			if runnel.ErrorCodeOf(err) != runnel.CodeProviderError || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Stream error = %v; want a provider_error saying %q", err, tc.wantErr)
			}
		})
	}
}

func (a Adapter) timeouts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fault    llmtest.Fault
		policy   provider.Policy
		requests int
		wantMsg  string
	}{{
		name:     "silent mid-stream",
		fault:    llmtest.Fault{Kind: llmtest.FaultHang, AfterChunks: 8},
		policy:   provider.Policy{Attempts: 3, FirstTokenTimeout: time.Minute, IdleTimeout: 100 * time.Millisecond},
		requests: 1,
		wantMsg:  "(idle timeout), after 1 attempt",
	}, {
		name:     "no first token",
		fault:    llmtest.Fault{Kind: llmtest.FaultHang},
		policy:   provider.Policy{Attempts: 2, BaseBackoff: time.Millisecond, FirstTokenTimeout: 100 * time.Millisecond},
		requests: 2,
		wantMsg:  "the model sent nothing for 100ms (first-token timeout), after 2 attempts",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			srv, cfg := a.Serve(t, llmtest.Rule{Reply: llmtest.Reply{Text: "never finished", ChunkSize: 2}, Fault: &tc.fault})
			_, _, err := Stream(t, provider.WithPolicy(a.New(cfg), tc.policy), a.Hello("hi"))
			if runnel.ErrorCodeOf(err) != runnel.CodeTimeout || !strings.HasSuffix(err.Error(), tc.wantMsg) {
				t.Errorf("Stream error = %v; want a timeout ending %q", err, tc.wantMsg)
			}
			if n := len(srv.Requests()); n != tc.requests {
				t.Errorf("requests = %d, want %d", n, tc.requests)
			}
		})
	}
}

func (a Adapter) contextCancel(t *testing.T) {
	_, cfg := a.Serve(t, llmtest.Rule{Fault: &llmtest.Fault{Kind: llmtest.FaultHang, AfterChunks: 8}, Reply: llmtest.Reply{Text: "abcdefghijkl", ChunkSize: 1}})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	_, err := a.New(cfg).Stream(ctx, a.Hello("hi"), func(provider.Chunk) { cancel() })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Stream = %v, want context.Canceled", err)
	}
}

func (a Adapter) connectionRefused(t *testing.T) {
	srv, cfg := a.Serve(t)
	srv.Close()
	_, _, err := Stream(t, a.New(cfg), a.Hello("hi"))
	var pe *provider.Error
	if !errors.As(err, &pe) || !pe.Retryable || pe.Status != 0 {
		t.Errorf("Stream = %#v, want a retryable *provider.Error without status", err)
	}
}

// CannedTransport answers every request with one fixed event stream after
// reading the whole request body, so a benchmark measures an adapter's own
// work (building, encoding, sending and decoding) without a socket or a
// server in the profile.
type CannedTransport string

// RoundTrip implements http.RoundTripper.
func (c CannedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	return &http.Response{
		StatusCode: http.StatusOK,
		Status:     "200 OK",
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"text/event-stream"}},
		Body:    io.NopCloser(strings.NewReader(string(c))),
		Request: req,
	}, nil
}
