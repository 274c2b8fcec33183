package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/llmtest"
	"github.com/runnel/runnel/runnelclient"
)

// TestOpenAPIAgainstRecordedTraffic drives `runnel serve` (the real run
// manager, the scripted model behind it) through every route and answer
// the OpenAPI document describes, records each request and response on
// the wire, and validates every one (every NDJSON line, every server-sent
// event) against the document the daemon serves at GET /openapi.json,
// with a JSON Schema 2020-12 validator. runnel's own objects are closed
// (additionalProperties false), so a field added to the code and not to
// the document fails here; so does a status, a content type or an event
// type the document does not list. Each event type the document lists
// must also appear in the traffic.
func TestOpenAPIAgainstRecordedTraffic(t *testing.T) {
	const token = "openapi-token-0123456789abcdef"
	llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{
		{Name: "after a tool", When: llmtest.Match{LastRole: llmtest.RoleTool},
			Reply: llmtest.Reply{Reasoning: "The tool answered.", Text: "Done: {{last_tool_result}}"}},
		{Name: "list", When: llmtest.Match{LastUserContains: "list the files"},
			Reply: llmtest.Reply{Reasoning: "Let me look.", ToolCalls: []llmtest.ToolCall{{Name: "ls", Arguments: json.RawMessage(`{}`)}}}},
		{Name: "approve", When: llmtest.Match{LastUserContains: "say hi in the shell"},
			Reply: llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: "bash", Arguments: json.RawMessage(`{"command":"echo hi"}`)}}}},
		{Name: "connect", When: llmtest.Match{LastUserContains: "connect github"},
			Reply: llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: "connect_account", Arguments: json.RawMessage(`{"provider":"github"}`)}}}},
		{Name: "hang", When: llmtest.Match{LastUserContains: "take your time"},
			Reply: llmtest.Reply{Text: "Thinking it over for a long while"}, Fault: &llmtest.Fault{Kind: llmtest.FaultHang, AfterChunks: 3}},
		{Name: "hello", Reply: llmtest.Reply{Text: "Hello: {{last_user}}"}},
	}})
	defer llm.Close()
	// An MCP server runnel may try (it is allow-listed) but cannot reach
	// (nothing listens there any more): a notice.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mcpAddr := ln.Addr().String()
	ln.Close()
	url, stderr, stop := startDaemon(t, map[string]string{"RUNNEL_TOKEN": token,
		"RUNNEL_CONCURRENCY_LIMIT": "1", "RUNNEL_MAX_BODY_BYTES": "256KiB", "RUNNEL_MCP_HOST_ALLOWLIST": mcpAddr}, nil)
	rec := &recorder{next: &http.Transport{}}
	defer rec.next.CloseIdleConnections()
	hc := &http.Client{Transport: rec}
	ctx := t.Context()

	// send records one exchange and returns its status and body.
	send := func(ctx context.Context, method, path, body string, header ...string) (*http.Response, []byte) {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, url+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}
	auth := []string{"Authorization", "Bearer " + token}
	ndjson := append([]string{"Accept", "application/x-ndjson"}, auth...)

	// The document, as served.
	resp, body := send(ctx, http.MethodGet, "/openapi.json", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /openapi.json: %d", resp.StatusCode)
	}
	spec := newSpec(t, body)

	// What runnel is.
	send(ctx, http.MethodGet, "/health", "", "X-Request-Id", "my-request-1")
	send(ctx, http.MethodGet, "/v1/capabilities", "", auth...)
	send(ctx, http.MethodGet, "/subscription-status", "", auth...)
	send(ctx, http.MethodGet, "/v1/profiles", "", auth...)
	send(ctx, http.MethodGet, "/metrics", "", auth...)

	// A run with a tool call, reasoning and a notice, one-shot and
	// streamed, given its model as Agenta v0.113 does.
	listReq := `{"model":"openai/gpt-test","modelConnection":{"provider":"openai","endpoint":{"baseUrl":"` + llm.URL + `/v1"},` +
		`"credentialMode":"env","credentials":[{"binding":{"kind":"environment","name":"OPENAI_API_KEY"},"value":"` + fakeKey + `"}]},` +
		`"tools":["ls"],"permissions":{"default":"allow_reads"},"sessionId":"s-list","turnId":"t1","projectId":"p1",` +
		`"mcpServers":[{"name":"docs","transport":"http","url":"http://` + mcpAddr + `/mcp"}],` +
		`"context":{"propagation":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}},` +
		`"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"please list the files"}]}]}`
	resp, body = send(ctx, http.MethodPost, "/run", listReq, auth...)
	if res := decodeResult(t, body); resp.StatusCode != http.StatusOK || !res.OK || !strings.HasPrefix(res.Output, "Done: ") {
		t.Fatalf("list run: %d %s", resp.StatusCode, body)
	}
	send(ctx, http.MethodPost, "/stream", listReq, ndjson...)

	// A run that pauses for an approval, streamed, then resumed with a
	// denial, one-shot.
	bash := func(messages string) string {
		return `{"model":"openai/gpt-test","endpoint":{"baseUrl":"` + llm.URL + `/v1"},"secrets":{"OPENAI_API_KEY":"` + fakeKey + `"},` +
			`"tools":["bash"],"permissions":{"default":"ask","rules":[{"pattern":"Bash(rm:*)","permission":"deny"}]},"messages":` + messages + `}`
	}
	ask := `[{"role":"user","content":"say hi in the shell"}]`
	_, body = send(ctx, http.MethodPost, "/run", bash(ask), ndjson...)
	paused := lastResult(t, body)
	if paused.Status != runnel.StatusPaused || len(paused.Interactions) != 1 || paused.Interactions[0].Kind != runnel.InteractionApproval {
		t.Fatalf("approval run: %s", body)
	}
	it := paused.Interactions[0]
	turn, _ := json.Marshal(paused.Messages)
	answer := `{"role":"tool","content":[{"type":"tool_result","toolCallId":"` + it.ToolCallID + `","toolName":"bash",` +
		`"kind":"approval","output":{"approved":false,"reason":"not now"}}]}`
	resumed := ask[:len(ask)-1] + "," + string(turn[1:len(turn)-1]) + "," + answer + "]"
	resp, body = send(ctx, http.MethodPost, "/run", bash(resumed), auth...)
	if res := decodeResult(t, body); resp.StatusCode != http.StatusOK || res.Status != runnel.StatusCompleted {
		t.Fatalf("resumed run: %d %s", resp.StatusCode, body)
	}

	// A run that pauses for a client tool, through runnelclient.
	client := runnelclient.New(url, runnelclient.WithToken(token), runnelclient.WithHTTPClient(hc))
	res, err := client.Run(ctx, &runnel.RunRequest{Model: "openai/gpt-test", Endpoint: &runnel.Endpoint{BaseURL: llm.URL + "/v1"},
		Secrets: map[string]string{"OPENAI_API_KEY": fakeKey}, Tools: []string{},
		CustomTools: []runnel.ToolSpec{{Name: "connect_account", Description: "Connect an account.", Kind: runnel.ToolKindClient,
			InputSchema: json.RawMessage(`{"type":"object","properties":{"provider":{"type":"string"}},"required":["provider"]}`),
			Render:      json.RawMessage(`{"kind":"connect"}`)}},
		Messages: []runnel.Message{runnel.UserText("connect github")}})
	if err != nil || res.Status != runnel.StatusPaused || len(res.Interactions) != 1 || res.Interactions[0].Kind != runnel.InteractionClientTool {
		t.Fatalf("client tool run: %+v, %v", res, err)
	}

	// Refusals: a request the plan refuses, one-shot (400) and streamed
	// (inside a 200 stream); a body that is not JSON; a missing token; an
	// unknown route; a wrong method; a body over the limit.
	refused := `{"model":"openai/gpt-test","secrets":{"OPENAI_API_KEY":"` + fakeKey + `"},"messages":[]}`
	if resp, _ := send(ctx, http.MethodPost, "/run", refused, auth...); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("refused one-shot: %d", resp.StatusCode)
	}
	if _, body := send(ctx, http.MethodPost, "/run", refused, ndjson...); lastResult(t, body).ErrorCode != runnel.CodeInvalidRequest {
		t.Errorf("refused stream: %s", body)
	}
	bad := invalidOnPurpose(ctx)
	for _, h := range [][]string{auth, ndjson} {
		if resp, _ := send(bad, http.MethodPost, "/run", `{"messages": [`, h...); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("undecodable body: %d", resp.StatusCode)
		}
	}
	if resp, _ := send(ctx, http.MethodPost, "/run", hiRequest(llm.URL), "Accept", "application/x-ndjson"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: %d", resp.StatusCode)
	}
	if resp, _ := send(ctx, http.MethodGet, "/v1/capabilities", "", "X-Agenta-Runner-Token", "wrong-"+token); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong token: %d", resp.StatusCode)
	}
	send(ctx, http.MethodGet, "/nowhere", "", auth...)
	send(ctx, http.MethodGet, "/run", "", auth...)
	huge := `{"systemPrompt":"` + strings.Repeat("x", 300<<10) + `","messages":[{"role":"user","content":"hi"}]}`
	if resp, _ := send(ctx, http.MethodPost, "/run", huge, auth...); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("huge body: %d", resp.StatusCode)
	}

	// A run that hangs holds the only run slot: another run is answered
	// 429, and POST /kill for its session ends it, cancelled.
	if resp, _ := send(bad, http.MethodPost, "/kill", `{"projectId":"p1"}`, auth...); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("kill without a session: %d", resp.StatusCode)
	}
	hangReq := &runnel.RunRequest{Model: "openai/gpt-test", Endpoint: &runnel.Endpoint{BaseURL: llm.URL + "/v1"},
		Secrets: map[string]string{"OPENAI_API_KEY": fakeKey}, Tools: []string{}, SessionID: "s-hang", ProjectID: "p1",
		Messages: []runnel.Message{runnel.UserText("take your time")}}
	started := make(chan struct{})
	type streamed struct {
		res *runnel.Result
		err error
	}
	done := make(chan streamed, 1)
	go func() {
		var once sync.Once
		res, err := client.Stream(ctx, hangReq, func(runnel.Event) { once.Do(func() { close(started) }) })
		done <- streamed{res, err}
	}()
	recv(t, started, "the hanging run's first event")
	if resp, _ := send(ctx, http.MethodPost, "/run", hiRequest(llm.URL), auth...); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("a second run at the limit: %d, want 429", resp.StatusCode)
	}
	if n, err := client.Kill(ctx, "s-hang", "p1"); n != 1 || err != nil {
		t.Errorf("kill: %d, %v", n, err)
	}
	if got := recv(t, done, "the killed stream"); got.err != nil || got.res.Status != runnel.StatusCancelled {
		t.Errorf("killed run: %+v, %v", got.res, got.err)
	}
	if n, err := client.Kill(ctx, "s-hang", "p1"); n != 0 || err != nil {
		t.Errorf("kill again: %d, %v", n, err)
	}

	// The chat stream (POST /v1/chat), when this build has it.
	chat := `{"id":"chat-1","trigger":"submit-message","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"hello chat"}]}],` +
		`"model":"openai/gpt-test","endpoint":{"baseUrl":"` + llm.URL + `/v1"},"secrets":{"OPENAI_API_KEY":"` + fakeKey + `"},"tools":[]}`
	send(ctx, http.MethodPost, "/v1/chat", chat, auth...)

	if code := stop(); code != exitOK {
		t.Errorf("serve exited %d", code)
	}
	for _, x := range rec.exchanges() {
		spec.check(t, x)
	}
	spec.checkCoverage(t)
	if strings.Contains(stderr.String(), token) || strings.Contains(stderr.String(), fakeKey) {
		t.Error("a secret reached the logs")
	}
}

func hiRequest(llmURL string) string {
	return `{"model":"openai/gpt-test","endpoint":{"baseUrl":"` + llmURL + `/v1"},"secrets":{"OPENAI_API_KEY":"` + fakeKey + `"},` +
		`"tools":[],"messages":[{"role":"user","content":"hi"}]}`
}

func decodeResult(t *testing.T, body []byte) *runnel.Result {
	t.Helper()
	var res runnel.Result
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatalf("not a result: %v: %s", err, body)
	}
	return &res
}

// lastResult returns the result record of an NDJSON body.
func lastResult(t *testing.T, body []byte) *runnel.Result {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	var rec struct {
		Result *runnel.Result `json:"result"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rec); err != nil || rec.Result == nil {
		t.Fatalf("no result record (%v): %s", err, body)
	}
	return rec.Result
}

type invalidKey struct{}

// invalidOnPurpose marks the requests made with ctx as ones the document
// must refuse.
func invalidOnPurpose(ctx context.Context) context.Context {
	return context.WithValue(ctx, invalidKey{}, true)
}

// exchange is one request and its response as they crossed the wire.
type exchange struct {
	method, path string
	reqHeader    http.Header
	reqBody      []byte
	invalid      bool // the request is invalid on purpose
	status       int
	header       http.Header
	body         bytes.Buffer // filled as the client reads it
	eof          bool         // the client read it all
}

// recorder is an http.RoundTripper that records every exchange.
type recorder struct {
	next *http.Transport
	mu   sync.Mutex
	log  []*exchange
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	x := &exchange{method: req.Method, path: req.URL.Path, reqHeader: req.Header.Clone(),
		invalid: req.Context().Value(invalidKey{}) != nil}
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		x.reqBody = b
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	x.status, x.header = resp.StatusCode, resp.Header.Clone()
	resp.Body = &tee{rc: resp.Body, r: r, x: x}
	r.mu.Lock()
	r.log = append(r.log, x)
	r.mu.Unlock()
	return resp, nil
}

func (r *recorder) exchanges() []*exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

// tee copies a response body into its exchange as it is read.
type tee struct {
	rc io.ReadCloser
	r  *recorder
	x  *exchange
}

func (t *tee) Read(p []byte) (int, error) {
	n, err := t.rc.Read(p)
	t.r.mu.Lock()
	t.x.body.Write(p[:n])
	t.x.eof = t.x.eof || err == io.EOF
	t.r.mu.Unlock()
	return n, err
}

func (t *tee) Close() error { return t.rc.Close() }

// spec is the OpenAPI document, compiled, and what the traffic covered.
type spec struct {
	doc      map[string]any
	c        *jsonschema.Compiler
	schemas  map[string]*jsonschema.Schema
	ops      map[string]bool // "METHOD path" exercised
	events   map[string]bool // event types seen
	statuses map[string]bool // "METHOD path status" seen
}

const specURL = "https://runnel.invalid/openapi.json"

func newSpec(t *testing.T, body []byte) *spec {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("GET /openapi.json is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(specURL, doc); err != nil {
		t.Fatal(err)
	}
	return &spec{doc: doc.(map[string]any), c: c, schemas: map[string]*jsonschema.Schema{},
		ops: map[string]bool{}, events: map[string]bool{}, statuses: map[string]bool{}}
}

// at follows a JSON pointer ("#/components/…") in the document, and the
// $refs it lands on.
func (s *spec) at(ptr string) (map[string]any, string) {
	var v any = s.doc
	for tok := range strings.SplitSeq(strings.TrimPrefix(ptr, "#/"), "/") {
		m, _ := v.(map[string]any)
		v = m[strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)]
	}
	m, _ := v.(map[string]any)
	if ref, ok := m["$ref"].(string); ok {
		return s.at(ref)
	}
	return m, ptr
}

func escape(s string) string { return strings.NewReplacer("~", "~0", "/", "~1").Replace(s) }

// validate validates the JSON text b against the schema at ptr.
func (s *spec) validate(ptr string, b []byte) error {
	sch, ok := s.schemas[ptr]
	if !ok {
		var err error
		if sch, err = s.c.Compile(specURL + ptr); err != nil {
			return err
		}
		s.schemas[ptr] = sch
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return sch.Validate(v)
}

// focus explains why an answer failed a oneOf: each event (of an NDJSON
// record or a one-shot result) and each chunk is validated against the
// variant its type names, which says what is wrong in a line or two.
func (s *spec) focus(mt string, item []byte, err error) error {
	var v struct {
		Type   string
		Event  json.RawMessage
		Events []json.RawMessage
	}
	if json.Unmarshal(item, &v) != nil {
		return err
	}
	switch {
	case mt == "text/event-stream":
		return s.variant("UIMessageChunk", v.Type, item, err)
	case v.Event != nil:
		v.Events = append(v.Events, v.Event)
	}
	for _, e := range v.Events {
		var ev struct{ Type string }
		json.Unmarshal(e, &ev)
		if verr := s.variant("Event", ev.Type, e, nil); verr != nil {
			return verr
		}
	}
	return err
}

// variant validates item against the member of the union its type names.
func (s *spec) variant(union, typ string, item []byte, err error) error {
	schema, _ := s.at("#/components/schemas/" + union)
	d, _ := schema["discriminator"].(map[string]any)
	mapping, _ := d["mapping"].(map[string]any)
	ptr, _ := mapping[typ].(string)
	if ptr == "" {
		return fmt.Errorf("%s type %q is not one openapi.json lists", union, typ)
	}
	if verr := s.validate(ptr, item); verr != nil {
		return fmt.Errorf("%s %q: %w\n%s", union, typ, verr, item)
	}
	return err
}

// check validates one exchange against the document.
func (s *spec) check(t *testing.T, x *exchange) {
	t.Helper()
	name := fmt.Sprintf("%s %s → %d", x.method, x.path, x.status)
	if !x.eof {
		t.Errorf("%s: the test did not read the whole answer", name)
		return
	}
	if id, sent := x.header.Get("X-Request-Id"), x.reqHeader.Get("X-Request-Id"); id == "" || sent != "" && id != sent {
		t.Errorf("%s: X-Request-Id %q, sent %q", name, id, sent)
	}
	paths, _ := s.doc["paths"].(map[string]any)
	item, _ := paths[x.path].(map[string]any)
	op, _ := item[strings.ToLower(x.method)].(map[string]any)
	var response string
	switch {
	case item == nil:
		response = "#/components/responses/NotFound"
		if x.status != http.StatusNotFound {
			t.Errorf("%s: the path is not in openapi.json, so the answer must be 404", name)
		}
	case op == nil:
		response = "#/components/responses/MethodNotAllowed"
		if x.status != http.StatusMethodNotAllowed {
			t.Errorf("%s: the method is not in openapi.json for this path, so the answer must be 405", name)
		}
	default:
		opPtr := "#/paths/" + escape(x.path) + "/" + strings.ToLower(x.method)
		s.ops[strings.ToUpper(x.method)+" "+x.path] = true
		s.statuses[fmt.Sprintf("%s %s %d", x.method, x.path, x.status)] = true
		s.checkRequest(t, name, opPtr, x)
		responses, _ := op["responses"].(map[string]any)
		for _, key := range []string{strconv.Itoa(x.status), strconv.Itoa(x.status/100) + "XX", "default"} {
			if _, ok := responses[key]; ok {
				response = opPtr + "/responses/" + key
				break
			}
		}
		if response == "" {
			t.Errorf("%s: openapi.json lists no such status for the operation: %s", name, x.body.Bytes())
			return
		}
	}
	r, ptr := s.at(response)
	headers, _ := r["headers"].(map[string]any)
	for h := range headers {
		hd, _ := s.at(ptr + "/headers/" + escape(h))
		if hd["required"] == true && x.header.Get(h) == "" {
			t.Errorf("%s: no %s header, which openapi.json requires", name, h)
		}
	}
	content, _ := r["content"].(map[string]any)
	mt, _, _ := mime.ParseMediaType(x.header.Get("Content-Type"))
	if len(content) == 0 {
		if x.body.Len() > 0 {
			t.Errorf("%s: openapi.json describes no body, got %q", name, mt)
		}
		return
	}
	if _, ok := content[mt]; !ok {
		t.Errorf("%s: content type %q is not one openapi.json lists (%v)", name, mt, slices.Sorted(maps.Keys(content)))
		return
	}
	schema := ptr + "/content/" + escape(mt) + "/schema"
	for i, item := range s.items(t, name, mt, x.body.Bytes()) {
		if err := s.validate(schema, item); err != nil {
			t.Errorf("%s: item %d of the answer does not match openapi.json: %v\n%s", name, i, s.focus(mt, item, err), item)
		}
		s.note(item)
	}
}

// checkRequest validates the request body; one invalid on purpose must
// be refused by the document too.
func (s *spec) checkRequest(t *testing.T, name, opPtr string, x *exchange) {
	t.Helper()
	op, _ := s.at(opPtr)
	rb, rbPtr := s.at(opPtr + "/requestBody")
	if _, ok := op["requestBody"]; !ok || len(x.reqBody) == 0 {
		return
	}
	mt, _, _ := mime.ParseMediaType(x.reqHeader.Get("Content-Type"))
	if _, ok := rb["content"].(map[string]any)[mt]; !ok {
		if !x.invalid {
			t.Errorf("%s: request content type %q is not in openapi.json", name, mt)
		}
		return
	}
	err := s.validate(rbPtr+"/content/"+escape(mt)+"/schema", x.reqBody)
	switch {
	case err != nil && !x.invalid:
		t.Errorf("%s: the request does not match openapi.json: %v", name, err)
	case err == nil && x.invalid:
		t.Errorf("%s: runnel refused the request, but openapi.json allows it: %s", name, x.reqBody)
	}
}

// items splits a body into the JSON texts its media type carries.
func (s *spec) items(t *testing.T, name, mt string, body []byte) [][]byte {
	t.Helper()
	switch mt {
	case "text/plain":
		// A text body (the metrics) is one string.
		b, _ := json.Marshal(string(body))
		return [][]byte{b}
	case "application/x-ndjson":
		var out [][]byte
		var kinds []string
		for line := range bytes.Lines(body) {
			if line = bytes.TrimSpace(line); len(line) == 0 {
				continue // a keep-alive
			}
			out = append(out, line)
			var rec struct{ Kind string }
			json.Unmarshal(line, &rec)
			kinds = append(kinds, rec.Kind)
		}
		if n := len(kinds); n == 0 || kinds[n-1] != "result" || slices.Index(kinds, "result") != n-1 {
			t.Errorf("%s: records %v, want events and exactly one result, last", name, kinds)
		}
		return out
	case "text/event-stream":
		var out [][]byte
		sc := bufio.NewScanner(bytes.NewReader(body))
		done := false
		for sc.Scan() {
			line := sc.Text()
			data, ok := strings.CutPrefix(line, "data: ")
			switch {
			case line == "" || strings.HasPrefix(line, ":"):
			case !ok:
				t.Errorf("%s: %q is not a data line or a comment", name, line)
			case done:
				t.Errorf("%s: %q after [DONE]", name, line)
			case data == "[DONE]":
				done = true
			default:
				out = append(out, []byte(data))
			}
		}
		if !done {
			t.Errorf("%s: the stream does not end with [DONE]", name)
		}
		return out
	}
	return [][]byte{body}
}

// note remembers the event types an answer carries.
func (s *spec) note(item []byte) {
	var v struct {
		Kind   string
		Type   string
		Event  *struct{ Type string }
		Result *struct{ Events []struct{ Type string } }
		Events []struct{ Type string }
	}
	if json.Unmarshal(item, &v) != nil {
		return
	}
	if v.Event != nil {
		s.events[v.Event.Type] = true
	}
	events := v.Events
	if v.Result != nil {
		events = append(events, v.Result.Events...)
	}
	for _, e := range events {
		s.events[e.Type] = true
	}
}

// checkCoverage wants every operation exercised (but those served only
// with an option the daemon was not given) and every event type seen.
func (s *spec) checkCoverage(t *testing.T) {
	t.Helper()
	for path, item := range s.doc["paths"].(map[string]any) {
		for method, op := range item.(map[string]any) {
			op, ok := op.(map[string]any)
			if _, conditional := op["x-runnel-only-with"]; !ok || conditional {
				continue
			}
			if !s.ops[strings.ToUpper(method)+" "+path] {
				t.Errorf("the traffic never exercised %s %s", strings.ToUpper(method), path)
			}
		}
	}
	event, _ := s.at("#/components/schemas/Event")
	mapping := event["discriminator"].(map[string]any)["mapping"].(map[string]any)
	var missing []string
	for typ := range mapping {
		if !s.events[typ] {
			missing = append(missing, typ)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		t.Errorf("the traffic carried no event of types %q: the test must show each against the real server", missing)
	}
	for _, want := range []string{"POST /run 200", "POST /stream 200", "POST /run 400", "POST /run 401", "POST /run 413",
		"POST /run 429", "POST /kill 200", "POST /kill 400", "GET /v1/capabilities 401"} {
		if !s.statuses[want] {
			t.Errorf("the traffic has no %s", want)
		}
	}
}
