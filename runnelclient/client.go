// Package runnelclient is a small typed client of runnel's HTTP API (the
// OpenAPI document runnel serves at GET /openapi.json): one-shot and
// streamed runs, killing a session's runs, health and capabilities. It
// speaks in the root package's types, so a platform in Go builds a
// runnel.RunRequest and reads a runnel.Result and runnel.Events.
//
//	c := runnelclient.New("http://127.0.0.1:8765", runnelclient.WithToken(token))
//	res, err := c.Stream(ctx, &runnel.RunRequest{Model: "openai/gpt-5",
//		Messages: []runnel.Message{runnel.UserText("hi")}},
//		func(e runnel.Event) { fmt.Print(e.Delta) })
//	var rerr *runnelclient.Error
//	if errors.As(err, &rerr) { … rerr.StatusCode, rerr.Code, rerr.Message … }
//
// A Client is safe for concurrent use.
package runnelclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/server"
	"github.com/runnel/runnel/internal/strictjson"
)

// DefaultMaxRecordBytes is the largest JSON document a Client reads by
// default: a whole one-shot answer, or one line of a stream.
const DefaultMaxRecordBytes = 64 << 20

// Client calls one runnel server.
type Client struct {
	base     string
	token    string
	hc       *http.Client
	maxBytes int
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends token as `Authorization: Bearer <token>` on every call.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient makes calls with hc instead of a plain http.Client. Give
// it no Timeout shorter than the runs it carries: a stream lasts as long
// as its run; cancel through the context instead.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithMaxRecordBytes bounds a one-shot answer and each line of a stream
// (default DefaultMaxRecordBytes); past it the call fails rather than
// buffer without end.
func WithMaxRecordBytes(n int) Option { return func(c *Client) { c.maxBytes = n } }

// New returns a client of the runnel serving at baseURL
// ("http://127.0.0.1:8765", or a prefix a proxy mounts runnel under).
func New(baseURL string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/")}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		c.hc = &http.Client{}
	}
	if c.maxBytes <= 0 {
		c.maxBytes = DefaultMaxRecordBytes
	}
	return c
}

// Health is the answer of GET /health.
type Health struct {
	Status    string   `json:"status"`
	Runner    string   `json:"runner"`
	Protocol  int      `json:"protocol"`
	Harnesses []string `json:"harnesses"`
	Features  []string `json:"features"`
	Sandboxes []string `json:"sandboxes,omitempty"`
}

// The answer of GET /v1/capabilities, as the server writes it.
type (
	Capabilities = server.Capabilities
	Limits       = server.Limits
	SandboxInfo  = server.SandboxInfo
	LimitInfo    = server.LimitInfo
	AgentInfo    = server.AgentInfo
)

// Run runs req and waits for its one JSON result. A completed or paused
// turn is a result; a refused or failed one is an *Error, whose Result
// holds what runnel answered (the failed run's messages and events).
func (c *Client) Run(ctx context.Context, req *runnel.RunRequest) (*runnel.Result, error) {
	resp, err := c.post(ctx, "/run", req, "application/json")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var res runnel.Result
	if err := c.decode(resp, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Kill cancels the runs of a session on this replica (POST /kill) and
// returns how many there were.
func (c *Client) Kill(ctx context.Context, sessionID, projectID string) (int, error) {
	body := struct {
		SessionID string `json:"sessionId"`
		ProjectID string `json:"projectId,omitempty"`
	}{sessionID, projectID}
	resp, err := c.post(ctx, "/kill", body, "application/json")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var out struct {
		OK     bool `json:"ok"`
		Killed int  `json:"killed"`
	}
	if err := c.decode(resp, &out); err != nil {
		return 0, err
	}
	return out.Killed, nil
}

// Health asks GET /health, which needs no token.
func (c *Client) Health(ctx context.Context) (*Health, error) {
	var h Health
	if err := c.get(ctx, "/health", &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// Capabilities asks GET /v1/capabilities: the harnesses, sandboxes,
// agents and limits of the server.
func (c *Client) Capabilities(ctx context.Context) (*Capabilities, error) {
	var caps Capabilities
	if err := c.get(ctx, "/v1/capabilities", &caps); err != nil {
		return nil, err
	}
	return &caps, nil
}

func (c *Client) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return fmt.Errorf("runnel: GET %s: %w", path, err)
	}
	resp, err := c.send(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return c.decode(resp, v)
}

// post sends body as JSON.
func (c *Client) post(ctx context.Context, path string, body any, accept string) (*http.Response, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("runnel: encoding the request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("runnel: POST %s: %w", path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	return c.send(req)
}

// send adds the token and sends req; a non-2xx answer is returned as an
// *Error. Errors name the route, never the token.
func (c *Client) send(req *http.Request) (*http.Response, error) {
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("runnel: %s %s: %w", req.Method, req.URL.Path, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, c.statusError(resp)
	}
	return resp, nil
}

// decode reads a JSON answer of at most maxBytes into v.
func (c *Client) decode(resp *http.Response, v any) error {
	if mt := mediaType(resp); mt != "application/json" {
		return fmt.Errorf("runnel: %s answered %q, not application/json", resp.Request.URL.Path, mt)
	}
	body, err := c.readAll(resp.Body)
	if err != nil {
		return fmt.Errorf("runnel: reading the answer of %s: %w", resp.Request.URL.Path, err)
	}
	if err := strictjson.Unmarshal(body, v); err != nil {
		return fmt.Errorf("runnel: decoding the answer of %s: %w", resp.Request.URL.Path, err)
	}
	return nil
}

// readAll reads r to its end, refusing more than maxBytes.
func (c *Client) readAll(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, int64(c.maxBytes)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > c.maxBytes {
		return nil, fmt.Errorf("the answer is larger than %d bytes", c.maxBytes)
	}
	return b, nil
}

func mediaType(resp *http.Response) string {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return mt
}
