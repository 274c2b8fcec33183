package llmtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

var apis = []string{APIChat, APIResponses, APIMessages}

// streamWith makes one streaming request of the API with its official SDK
// (Gemini: by hand, as @google/genai does), calling onEvent with the running
// count of events the client surfaced, and returns that count and the
// stream's error.
func streamWith(ctx context.Context, t *testing.T, srv *Server, api string, onEvent func(int)) (int, error) {
	t.Helper()
	n := 0
	next := func() { n++; onEvent(n) }
	switch api {
	case APIGemini:
		chunks, err := geminiStream(ctx, t, srv, "gemini-test", geminiRequestBody, onEvent)
		return len(chunks), err
	case APIChat:
		c := openaiClient(t, srv)
		s := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model: "gpt-test", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		})
		defer s.Close()
		for s.Next() {
			next()
		}
		return n, s.Err()
	case APIResponses:
		c := openaiClient(t, srv)
		s := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{
			Model: "gpt-test", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
		})
		defer s.Close()
		for s.Next() {
			next()
		}
		return n, s.Err()
	}
	c := anthropicClient(t, srv)
	s := c.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
		Model: "claude-test", MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	})
	defer s.Close()
	for s.Next() {
		next()
	}
	return n, s.Err()
}

func faultRule(f Fault) Rule {
	return Rule{Name: "faulty", Reply: Reply{Text: "a reply long enough to be cut"}, Fault: &f}
}

func TestStatusFault(t *testing.T) {
	for _, api := range allAPIs {
		t.Run(api, func(t *testing.T) {
			srv := start(t, faultRule(Fault{Kind: FaultStatus, Status: 429, RetryAfter: "1"}))
			n, err := streamWith(context.Background(), t, srv, api, func(int) {})
			if n != 0 {
				t.Errorf("%d events before the error", n)
			}
			var status int
			var header http.Header
			switch api {
			case APIGemini:
				var e *geminiHTTPError
				if !errors.As(err, &e) {
					t.Fatalf("error %v, want a Gemini error status", err)
				}
				status, header = e.Status, e.Header
				if !bytes.Contains(e.Body, []byte(`"status":"RESOURCE_EXHAUSTED"`)) {
					t.Errorf("error body %s", e.Body)
				}
			case APIMessages:
				var e *anthropic.Error
				if !errors.As(err, &e) {
					t.Fatalf("error %v, want *anthropic.Error", err)
				}
				status, header = e.StatusCode, e.Response.Header
				if e.Type() != "rate_limit_error" || e.RequestID == "" {
					t.Errorf("error type %q request id %q", e.Type(), e.RequestID)
				}
			default:
				var e *openai.Error
				if !errors.As(err, &e) {
					t.Fatalf("error %v, want *openai.Error", err)
				}
				status, header = e.StatusCode, e.Response.Header
				if e.Code != "rate_limit_exceeded" {
					t.Errorf("error code %q", e.Code)
				}
			}
			if status != 429 || header.Get("Retry-After") != "1" {
				t.Errorf("status %d Retry-After %q, want 429 and 1", status, header.Get("Retry-After"))
			}
		})
	}
}

// With Times, the fault hits the first requests only, so a client that
// retries (honouring Retry-After) gets through.
func TestStatusFaultTimesThenRetrySucceeds(t *testing.T) {
	srv := start(t, faultRule(Fault{Kind: FaultStatus, Status: 503, RetryAfter: "0", Times: 1}))
	client := openaiClient(t, srv, option.WithMaxRetries(2))
	res, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "gpt-test", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	if err != nil {
		t.Fatalf("New after a retry: %v", err)
	}
	if res.Choices[0].Message.Content != "a reply long enough to be cut" || len(srv.Requests()) != 2 {
		t.Errorf("content %q after %d requests, want the reply after 2", res.Choices[0].Message.Content, len(srv.Requests()))
	}
}

func TestFaultTimesCountsPerRule(t *testing.T) {
	srv := start(t, faultRule(Fault{Kind: FaultStatus, Status: 500, Times: 2}))
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	var got []int
	for range 3 {
		status, _ := post(t, srv, "/v1/chat/completions", body)
		got = append(got, status)
	}
	if want := []int{500, 500, 200}; !equalInts(got, want) {
		t.Errorf("statuses %v, want %v", got, want)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestCutFault(t *testing.T) {
	cases := []struct {
		name     string
		fault    Fault
		events   int
		wantEOF  bool // the body ends without its terminating chunk
		anyError bool // no response at all: the error is the transport's
	}{
		{"after one event", Fault{Kind: FaultCut, AfterChunks: 1}, 1, true, false},
		{"headers flushed", Fault{Kind: FaultCut, FlushHeaders: true}, 0, true, false},
		{"before headers", Fault{Kind: FaultCut}, 0, false, true},
	}
	for _, api := range allAPIs {
		for _, tc := range cases {
			t.Run(api+"/"+tc.name, func(t *testing.T) {
				srv := start(t, faultRule(tc.fault))
				n, err := streamWith(context.Background(), t, srv, api, func(int) {})
				if n != tc.events {
					t.Errorf("%d events before the cut, want %d", n, tc.events)
				}
				switch {
				case err == nil:
					t.Fatal("a cut stream ended without an error")
				case tc.wantEOF && !errors.Is(err, io.ErrUnexpectedEOF):
					t.Errorf("error %v, want an unexpected EOF", err)
				}
			})
		}
	}
}

func TestMalformedFault(t *testing.T) {
	for _, api := range allAPIs {
		t.Run(api, func(t *testing.T) {
			srv := start(t, faultRule(Fault{Kind: FaultMalformed, AfterChunks: 1}))
			n, err := streamWith(context.Background(), t, srv, api, func(int) {})
			var syntax *json.SyntaxError
			if !errors.As(err, &syntax) {
				t.Errorf("error %v, want a JSON syntax error", err)
			}
			if n != 1 {
				t.Errorf("%d events before the malformed one, want 1", n)
			}
		})
	}
}

func TestHangFault(t *testing.T) {
	for _, api := range allAPIs {
		// The client gives up after the first event: the call returns with
		// its context's error although the server never ends the stream.
		t.Run(api+"/after one event", func(t *testing.T) {
			srv := start(t, faultRule(Fault{Kind: FaultHang, AfterChunks: 1}))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			n, err := streamWith(ctx, t, srv, api, func(int) { cancel() })
			if n != 1 || !errors.Is(err, context.Canceled) {
				t.Errorf("%d events, error %v: want 1 and context.Canceled", n, err)
			}
		})
		// Before headers the client is still in Do; it gives up once the
		// server holds the request.
		t.Run(api+"/before headers", func(t *testing.T) {
			srv := NewServer(Script{Rules: []Rule{faultRule(Fault{Kind: FaultHang})}})
			defer srv.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			srv.handler.observe = func(Request) { cancel() }
			n, err := streamWith(ctx, t, srv, api, func(int) {})
			if n != 0 || !errors.Is(err, context.Canceled) {
				t.Errorf("%d events, error %v: want 0 and context.Canceled", n, err)
			}
		})
		// Closing the server releases a hung response: the client sees the
		// connection end mid-body.
		t.Run(api+"/server closes", func(t *testing.T) {
			srv := NewServer(Script{Rules: []Rule{faultRule(Fault{Kind: FaultHang, FlushHeaders: true})}})
			defer srv.Close()
			// Close once the client holds the response headers.
			closed := make(chan struct{})
			ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
				GotFirstResponseByte: func() { go func() { srv.Close(); close(closed) }() },
			})
			n, err := streamWith(ctx, t, srv, api, func(int) {})
			<-closed
			if n != 0 || !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("%d events, error %v: want 0 and an unexpected EOF", n, err)
			}
		})
	}
}

// The AI SDK's generateText uses non-streaming chat completions; faults
// apply there too.
func TestNonStreamingFaults(t *testing.T) {
	cases := []struct {
		name  string
		fault Fault
		check func(error) bool
	}{
		{"cut mid-body", Fault{Kind: FaultCut, AfterChunks: 1}, func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }},
		{"malformed", Fault{Kind: FaultMalformed}, func(err error) bool { return err != nil }},
		{"status", Fault{Kind: FaultStatus, Status: 500}, func(err error) bool {
			var e *openai.Error
			return errors.As(err, &e) && e.StatusCode == 500
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := start(t, faultRule(tc.fault))
			c := openaiClient(t, srv)
			_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
				Model: "gpt-test", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			})
			if !tc.check(err) {
				t.Errorf("error %v", err)
			}
		})
	}
	t.Run("hang", func(t *testing.T) {
		srv := NewServer(Script{Rules: []Rule{faultRule(Fault{Kind: FaultHang, AfterChunks: 1})}})
		defer srv.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		srv.handler.observe = func(Request) { cancel() }
		c := openaiClient(t, srv)
		_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: "gpt-test", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error %v, want context.Canceled", err)
		}
	})
}

// An endless stream repeats one text delta until the client gives up; every
// repetition is a well-formed event the client accepts.
func TestEndlessFault(t *testing.T) {
	textDelta := map[string]int{APIChat: 1, APIResponses: 4, APIMessages: 3, APIGemini: 0}
	for _, api := range allAPIs {
		t.Run(api, func(t *testing.T) {
			srv := start(t, faultRule(Fault{Kind: FaultEndless, AfterChunks: textDelta[api]}))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			const enough = 200
			n, err := streamWith(ctx, t, srv, api, func(n int) {
				if n == enough {
					cancel()
				}
			})
			// Events already buffered still surface after the cancel.
			if n < enough || !errors.Is(err, context.Canceled) {
				t.Errorf("%d events, error %v: want %d or more and context.Canceled", n, err, enough)
			}
		})
	}
}
