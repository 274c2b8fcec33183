// Package openai adapts the OpenAI Chat Completions API (and any
// OpenAI-compatible server: Ollama, vLLM, llama.cpp, OpenRouter) and the
// OpenAI Responses API to provider.Model.
//
// The official SDK builds, authenticates and sends each request (its own
// retries off: provider.WithPolicy owns retries); this package reads the
// event stream itself, because the SDK cannot tell a stream that ended
// with its terminating event from one that was cut off.
//
//	m := openai.NewChat(provider.Config{APIKey: key})
//	resp, err := m.Stream(ctx, &provider.Request{Model: "gpt-5", Messages: msgs}, emit)
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/runnel/runnel/internal/provider"
)

const defaultBaseURL = "https://api.openai.com/v1/"

// clientOptions turns cfg into SDK options. The services are built from
// these alone, never from openai.NewClient, which would read OPENAI_*
// variables from the environment.
func clientOptions(cfg provider.Config) []option.RequestOption {
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	base := cfg.BaseURL
	if base == "" {
		base = defaultBaseURL
	}
	opts := []option.RequestOption{
		option.WithHTTPClient(hc),
		option.WithBaseURL(base),
		option.WithMaxRetries(0),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	if cfg.APIVersion != "" {
		// Azure OpenAI: the version is a query parameter and a key travels
		// in api-key rather than as a bearer token.
		opts = append(opts, option.WithQuery("api-version", cfg.APIVersion))
		if cfg.APIKey != "" {
			opts = append(opts, option.WithHeader("api-key", cfg.APIKey))
		}
	}
	for k, v := range cfg.Headers {
		opts = append(opts, option.WithHeader(k, v))
	}
	return opts
}

// errorBody keeps the body of an error response. The SDK decodes only the
// OpenAI error shape and drops the body otherwise; compatible servers send
// {"error": "text"}, {"detail": …} or plain text.
type errorBody struct{ b []byte }

func (e *errorBody) middleware(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err != nil || res.StatusCode < 400 {
		return res, err
	}
	e.b, _ = io.ReadAll(io.LimitReader(res.Body, 64<<10))
	_ = res.Body.Close()
	res.Body = io.NopCloser(bytes.NewReader(e.b))
	return res, nil
}

// requestError classifies a failed request: the context's own cause, an
// HTTP error, or a connection failure.
func requestError(ctx context.Context, api, key string, raw *http.Response, body *errorBody, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if raw != nil && raw.StatusCode >= 400 {
		return provider.HTTPError(api, raw.StatusCode, raw.Header, scrub(errorDetail(body.b), key))
	}
	return provider.ConnError(api, err)
}

// checkStream refuses a 2xx answer that is not an event stream, such as a
// server that ignored "stream": true.
func checkStream(api string, raw *http.Response) error {
	mt, _, _ := mime.ParseMediaType(raw.Header.Get("Content-Type"))
	if mt == "" || mt == "text/event-stream" {
		return nil
	}
	_ = raw.Body.Close()
	return &provider.Error{Status: raw.StatusCode, Message: api + ": the server answered with " + mt + " instead of an event stream"}
}

// streamEnd is the error for a stream that stopped before its
// terminating event.
func streamEnd(ctx context.Context, api string, dec ssestream.Decoder, emitted bool, terminator string) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if err := dec.Err(); err != nil {
		return provider.StreamError(api, emitted, err, "the stream broke off: %v", err)
	}
	return provider.StreamError(api, emitted, io.ErrUnexpectedEOF, "the stream ended without %s", terminator)
}

// errorDetail extracts the API's message from an error body.
func errorDetail(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return ""
	}
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(b, &v) == nil {
		var nested struct {
			Message string `json:"message"`
		}
		var s string
		switch {
		case json.Unmarshal(v.Error, &nested) == nil && nested.Message != "":
			return oneLine(nested.Message)
		case json.Unmarshal(v.Error, &s) == nil && s != "":
			return oneLine(s)
		case v.Message != "":
			return oneLine(v.Message)
		case json.Unmarshal(v.Detail, &s) == nil && s != "":
			return oneLine(s)
		case len(v.Detail) > 0:
			return oneLine(string(v.Detail))
		}
		return ""
	}
	if b[0] == '<' { // an HTML error page says nothing useful
		return ""
	}
	return oneLine(string(b))
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s
}

// scrub removes the API key from a server's message; some servers echo it.
func scrub(s, key string) string {
	if key == "" {
		return s
	}
	return strings.ReplaceAll(s, key, "[redacted]")
}

// toolInput is a tool call's complete arguments as a block's Input: empty
// becomes {}, and text that is not JSON is kept as a JSON string so the
// loop can tell the model its arguments were invalid.
func toolInput(args string) json.RawMessage {
	a := strings.TrimSpace(args)
	if a == "" {
		return json.RawMessage("{}")
	}
	if json.Valid([]byte(a)) {
		return json.RawMessage(a)
	}
	b, _ := json.Marshal(args) // a string always marshals
	return b
}

// toolArguments is the reverse of toolInput for replay: the arguments
// text the model originally sent.
func toolArguments(input json.RawMessage) string {
	in := bytes.TrimSpace(input)
	if len(in) == 0 {
		return "{}"
	}
	if in[0] == '"' {
		var s string
		if json.Unmarshal(in, &s) == nil {
			return s
		}
	}
	return string(in)
}

// schemaMap decodes a tool's JSON Schema; a missing or unusable schema
// becomes the empty object schema rather than no schema at all.
func schemaMap(schema json.RawMessage) map[string]any {
	var m map[string]any
	if err := json.Unmarshal(schema, &m); err != nil || m == nil {
		m = map[string]any{"type": "object", "properties": map[string]any{}}
	}
	return m
}

// imageURL is an image block as a URL: its uri, or a data URL of its bytes.
func imageURL(mimeType, data, uri string) string {
	if data != "" {
		if mimeType == "" {
			mimeType = "image/png"
		}
		return "data:" + mimeType + ";base64," + data
	}
	return uri
}

// sseData is one event's data without the decoder's trailing newline.
func sseData(e ssestream.Event) []byte { return bytes.TrimSpace(e.Data) }
