// Package openai adapts the OpenAI Chat Completions API (and any
// OpenAI-compatible server: Ollama, vLLM, llama.cpp, OpenRouter) and the
// OpenAI Responses API to provider.Model.
//
// Requests are encoded here with encoding/json and posted with the
// configured http.Client; the event stream is read here too. The official
// SDK (github.com/openai/openai-go) is not used at run time: its
// reflective request encoder cost more than the rest of a step put
// together (docs/decisions.md, "Providers"), and its stream treats a cut
// connection like the terminating event. Retries belong to
// provider.WithPolicy, so one Stream call is one HTTP request.
//
//	m := openai.NewChat(provider.Config{APIKey: key})
//	resp, err := m.Stream(ctx, &provider.Request{Model: "gpt-5", Messages: msgs}, emit)
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/provider"
)

const defaultBaseURL = "https://api.openai.com/v1/"

// endpoint is where an adapter posts and how: the URL, the headers and the
// client, all fixed when the adapter is built. Nothing is read from the
// environment.
type endpoint struct {
	api    string
	url    string
	urlErr error
	header http.Header
	client *http.Client
	key    string
}

func newEndpoint(api, path string, cfg provider.Config) endpoint {
	base := cfg.BaseURL
	if base == "" {
		base = defaultBaseURL
	}
	var query url.Values
	h := http.Header{}
	h.Set("Accept", "application/json") // what the SDKs send, streaming or not
	h.Set("User-Agent", "runnel")
	if cfg.APIVersion != "" {
		// Azure OpenAI: the version is a query parameter and a key travels
		// in api-key as well as a bearer token.
		query = url.Values{"api-version": {cfg.APIVersion}}
		if cfg.APIKey != "" {
			h.Set("Api-Key", cfg.APIKey)
		}
	}
	for k, v := range cfg.Headers {
		h.Set(k, v)
	}
	if cfg.APIKey != "" {
		h.Set("Authorization", "Bearer "+cfg.APIKey)
	}
	u, err := provider.EndpointURL(base, path, query)
	return endpoint{api: api, url: u, urlErr: err, header: h, client: provider.SameOriginClient(cfg.HTTPClient), key: cfg.APIKey}
}

// post posts an encoded body, in parts, and returns the event stream.
func (e *endpoint) post(ctx context.Context, body [][]byte) (*http.Response, error) {
	if e.urlErr != nil {
		return nil, &provider.Error{Message: e.api + ": " + e.urlErr.Error(), Err: e.urlErr}
	}
	return provider.OpenStream(ctx, e.client, &provider.StreamRequest{
		API: e.api, URL: e.url, Header: e.header, Parts: body, Secret: e.key,
	})
}

// assemble writes a request body as encoding/json writes its struct:
// {"model":…,"<list>":[lead, the messages' items], then tail's fields}
// and a newline, in parts: joined (the run's cached encoding of the
// messages) is sent as it is, never copied. tail is the struct with model
// and the list left out (both omitempty and zero there), so its fields
// keep their order.
func assemble(model, list string, tail any, lead func([]byte) ([]byte, error), joined []byte) ([][]byte, error) {
	head, err := provider.AppendJSON([]byte(`{"model":`), model)
	if err != nil {
		return nil, err
	}
	head = append(head, `,"`+list+`":[`...)
	n := len(head)
	if head, err = lead(head); err != nil {
		return nil, err
	}
	if len(head) > n && len(joined) > 0 {
		head = append(head, ',')
	}
	rest, err := provider.AppendJSON([]byte("]"), tail)
	if err != nil {
		return nil, err
	}
	if len(rest) > 3 { // ] and more than {}
		rest[1] = ','
	} else {
		rest = append(rest[:1], '}')
	}
	return [][]byte{head, joined, append(rest, '\n')}, nil
}

// appendEach appends the JSON of each item, comma-separated.
func appendEach[T any](dst []byte, items []T) ([]byte, error) {
	for i, it := range items {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = provider.AppendJSON(dst, it); err != nil {
			return nil, err
		}
	}
	return dst, nil
}

// streamEnd is the error for a stream that stopped before its
// terminating event.
func streamEnd(ctx context.Context, api string, er *provider.EventReader, emitted bool, terminator string) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if err := er.Err(); err != nil {
		return provider.StreamError(api, emitted, err, "the stream broke off: %v", err)
	}
	return provider.StreamError(api, emitted, io.ErrUnexpectedEOF, "the stream ended without %s", terminator)
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

// toolSchema is a tool's JSON Schema as sent; a missing or unusable schema
// becomes the empty object schema rather than no schema at all.
func toolSchema(schema json.RawMessage) json.RawMessage {
	s := bytes.TrimSpace(schema)
	if len(s) == 0 || s[0] != '{' || !json.Valid(s) {
		return json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return s
}

// imageURL is an image block as a URL: its uri, or a data URL of its bytes.
// dataURL is inline base64 data as a data URL.
func dataURL(mimeType, data string) string {
	if mimeType == "" {
		mimeType = "application/octet-stream"
	}
	return "data:" + mimeType + ";base64," + data
}

// fileName is the name a file part is sent under.
func fileName(b runnel.Block) string {
	if b.Filename != "" {
		return b.Filename
	}
	return "attachment"
}

// fileMention tells the model of a file it cannot be given inline.
func fileMention(b runnel.Block) string {
	return fmt.Sprintf("[The user attached the file %s (%s): %s]", fileName(b), orOctets(b.MimeType), b.URI)
}

func orOctets(mimeType string) string {
	if mimeType == "" {
		return "application/octet-stream"
	}
	return mimeType
}

func imageURL(mimeType, data, uri string) string {
	if data != "" {
		if mimeType == "" {
			mimeType = "image/png"
		}
		return "data:" + mimeType + ";base64," + data
	}
	return uri
}

// scrubbed removes the API key from an error the server's stream brought:
// some servers quote the key they were given in the error they report.
func (e *endpoint) scrubbed(err error) error {
	var perr *provider.Error
	if e.key == "" || !errors.As(err, &perr) {
		return err
	}
	perr.Message = provider.Scrub(perr.Message, e.key)
	if perr.Err != nil && strings.Contains(perr.Err.Error(), e.key) {
		perr.Err = errors.New(provider.Scrub(perr.Err.Error(), e.key))
	}
	return err
}
