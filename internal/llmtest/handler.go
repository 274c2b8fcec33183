package llmtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// maxBody bounds a request body; agents with long histories stay far below it.
const maxBody = 32 << 20

// Request is one model request the handler received.
type Request struct {
	API  string
	Path string
	// Header is the request header as received, credentials included: tests
	// may check it, nothing should print it.
	Header http.Header
	Body   []byte
	// Conversation is the normalised view the rules were matched against.
	Conversation Conversation
	// Rule names the rule that answered; "" when none matched or the body was
	// not a valid request.
	Rule string
}

// Handler is the fake model server as an http.Handler, to mount in a server
// of one's own. It is safe for concurrent use. Faults abort connections with
// panic(http.ErrAbortHandler), which net/http's server recovers.
type Handler struct {
	rules  []Rule
	faults []atomic.Int64 // per rule: how many requests it has answered with its fault
	logger *slog.Logger
	mux    *http.ServeMux

	done    chan struct{} // closed by Close: ends hangs and delays
	release sync.Once

	mu       sync.Mutex
	closed   bool
	active   sync.WaitGroup
	requests []Request
	// discard keeps requests from being recorded. Serve sets it: nobody
	// can read its handler's requests, and a long session would otherwise
	// keep every conversation, whole, for the life of the process.
	discard bool

	// observe, when set before the first request, sees every recorded
	// request; tests use it to learn that a handler is about to hang.
	observe func(Request)
}

// NewHandler returns a handler answering with the script. It panics when the
// script is invalid (see [Script.Validate]): a script is written by the
// programmer, and LoadScript already reports file errors.
func NewHandler(s Script) *Handler {
	if err := s.Validate(); err != nil {
		panic("llmtest: invalid script: " + err.Error())
	}
	h := &Handler{
		rules:  append([]Rule(nil), s.Rules...),
		faults: make([]atomic.Int64, len(s.Rules)),
		logger: slog.New(slog.DiscardHandler),
		mux:    http.NewServeMux(),
		done:   make(chan struct{}),
	}
	h.mux.HandleFunc("POST /v1/chat/completions", h.model(APIChat))
	h.mux.HandleFunc("POST /v1/responses", h.model(APIResponses))
	h.mux.HandleFunc("POST /v1/messages", h.model(APIMessages))
	h.mux.HandleFunc("POST /v1/messages/count_tokens", h.countTokens(APIMessages))
	// Gemini puts the method after a colon in the last segment, which a
	// pattern cannot match; geminiModel dispatches on it. v1 is v1beta's
	// stable twin with the same shapes.
	h.mux.HandleFunc("POST /v1beta/models/{call}", h.geminiModel)
	h.mux.HandleFunc("POST /v1/models/{call}", h.geminiModel)
	h.mux.HandleFunc("GET /v1/models", h.models)
	h.mux.HandleFunc("GET /v1beta/models", h.models)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, openAIError(http.StatusNotFound,
			fmt.Sprintf("llmtest: no route for %s %s; serving POST /v1/chat/completions, /v1/responses, /v1/messages, /v1beta/models/{model}:generateContent and :streamGenerateContent", r.Method, r.URL.Path)))
	})
	return h
}

// ServeHTTP answers one request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		writeJSON(w, http.StatusServiceUnavailable, openAIError(http.StatusServiceUnavailable, "llmtest: server closed"))
		return
	}
	h.active.Add(1)
	h.mu.Unlock()
	defer h.active.Done()
	h.mux.ServeHTTP(w, r)
}

// Close ends hung and slowed responses (their connections are aborted),
// refuses new requests and waits for the handlers in flight to return.
func (h *Handler) Close() {
	h.unblock()
	h.active.Wait()
}

func (h *Handler) unblock() {
	h.release.Do(func() {
		h.mu.Lock()
		h.closed = true
		h.mu.Unlock()
		close(h.done)
	})
}

// Requests returns a copy of the model requests received so far, in order.
func (h *Handler) Requests() []Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Request(nil), h.requests...)
}

func (h *Handler) record(r Request) {
	if !h.discard {
		h.mu.Lock()
		h.requests = append(h.requests, r)
		h.mu.Unlock()
	}
	if h.observe != nil {
		h.observe(r)
	}
}

// model serves one model API endpoint.
func (h *Handler) model(api string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h.answer(w, r, api, geminiMethod{})
	}
}

// geminiModel serves POST /v1beta/models/{model}:{method}.
func (h *Handler) geminiModel(w http.ResponseWriter, r *http.Request) {
	m, ok := parseGeminiCall(r.PathValue("call"), r.URL.Query().Get("alt"))
	switch {
	case !ok:
		writeJSON(w, http.StatusNotFound, geminiError(http.StatusNotFound,
			fmt.Sprintf("llmtest: no route for %s %s; serving {model}:generateContent, :streamGenerateContent and :countTokens", r.Method, r.URL.Path)))
	case m.action == "countTokens":
		h.countTokens(APIGemini)(w, r)
	default:
		h.answer(w, r, APIGemini, m)
	}
}

// answer matches one model request against the rules and replies. gm is
// what a Gemini path said (model, streaming), zero for the other APIs.
func (h *Handler) answer(w http.ResponseWriter, r *http.Request, api string, gm geminiMethod) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	reqID := "req_" + digest(body)
	if err != nil {
		h.fail(w, api, http.StatusRequestEntityTooLarge, "llmtest: read body: "+err.Error(), reqID, "")
		return
	}
	conv, err := normalize(api, body)
	if api == APIGemini {
		conv.Model, conv.Stream = gm.model, gm.action == "streamGenerateContent"
	}
	rec := Request{API: api, Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Conversation: conv}
	if err != nil {
		h.record(rec)
		h.fail(w, api, http.StatusBadRequest, "llmtest: invalid request body: "+err.Error(), reqID, "")
		return
	}
	i, ok := h.match(&conv)
	if !ok {
		h.record(rec)
		msg := noRuleMessage(&conv)
		h.logger.Warn("mockllm: no rule matched", "api", api, "detail", msg)
		h.fail(w, api, http.StatusBadRequest, msg, reqID, "")
		return
	}
	rule := h.rules[i]
	rec.Rule = rule.label(i)
	h.record(rec)
	fault := h.faultFor(i)
	h.logger.Info("mockllm request", "api", api, "model", conv.Model, "stream", conv.Stream,
		"rule", rec.Rule, "last_role", conv.LastRole(), "tool_results", conv.ToolResultCount(),
		"fault", faultKind(fault))

	if fault != nil && fault.Kind == FaultStatus {
		h.fail(w, api, fault.Status, fmt.Sprintf("llmtest: scripted %d from %s", fault.Status, rec.Rule), reqID, fault.RetryAfter)
		return
	}
	prefix := "call_"
	if api == APIMessages {
		prefix = "toolu_"
	}
	o := resolve(rule.Reply, &conv, body, prefix)
	o.includeUsage = api == APIChat && chatIncludeUsage(body)
	setRequestID(w.Header(), api, reqID)
	switch {
	case api == APIGemini && conv.Stream && !gm.sse:
		h.respond(w, r, o.geminiArray(), fault)
	case conv.Stream:
		h.stream(w, r, o.events(api), o.delay, fault)
	default:
		h.respond(w, r, o.body(api), fault)
	}
}

// countTokens answers a token count (Anthropic count_tokens, Gemini
// countTokens) outside the rules: it is no model turn, and agents ask it
// before turns a script cannot foresee. The count is a pure function of the
// body, about four bytes a token.
func (h *Handler) countTokens(api string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		reqID := "req_" + digest(body)
		if err != nil {
			h.fail(w, api, http.StatusRequestEntityTooLarge, "llmtest: read body: "+err.Error(), reqID, "")
			return
		}
		if !json.Valid(body) {
			h.fail(w, api, http.StatusBadRequest, "llmtest: invalid request body: not JSON", reqID, "")
			return
		}
		n := max(1, (len(body)+3)/4)
		setRequestID(w.Header(), api, reqID)
		if api == APIGemini {
			writeJSON(w, http.StatusOK, mustJSON(obj{{"totalTokens", n}}))
			return
		}
		writeJSON(w, http.StatusOK, mustJSON(obj{{"input_tokens", n}}))
	}
}

func (h *Handler) match(c *Conversation) (int, bool) {
	for i := range h.rules {
		if h.rules[i].When.matches(c) {
			return i, true
		}
	}
	return -1, false
}

// faultFor returns the fault rule i answers this request with, or nil once
// its Times are used up.
func (h *Handler) faultFor(i int) *Fault {
	f := h.rules[i].Fault
	if f == nil {
		return nil
	}
	if f.Times > 0 && h.faults[i].Add(1) > int64(f.Times) {
		return nil
	}
	return f
}

func faultKind(f *Fault) string {
	if f == nil {
		return ""
	}
	return f.Kind
}

func noRuleMessage(c *Conversation) string {
	user := c.LastUser()
	if len(user) > 200 {
		user = user[:200] + "…"
	}
	return fmt.Sprintf("llmtest: no rule matched this %s request (model %q, last role %q, last user message %q, %d tool results, tools %q)",
		c.API, c.Model, c.LastRole(), user, c.ToolResultCount(), c.Tools)
}

func (o outcome) events(api string) []sseEvent {
	switch api {
	case APIChat:
		return o.chatStream()
	case APIResponses:
		return o.responsesStream()
	case APIGemini:
		return o.geminiStream()
	}
	return o.messagesStream()
}

func (o outcome) body(api string) []byte {
	switch api {
	case APIChat:
		return o.chatJSON()
	case APIResponses:
		return o.responsesJSON()
	case APIGemini:
		return o.geminiJSON()
	}
	return o.messagesJSON()
}

// stream writes the events as SSE, one flush per event, applying the fault.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, events []sseEvent, delay time.Duration, f *Fault) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	rc := http.NewResponseController(w)
	at := -1 // the event index the fault strikes at
	if f != nil {
		at = min(f.AfterChunks, len(events))
		if f.Kind == FaultMalformed {
			at = min(at, len(events)-1)
			for at < len(events)-1 && events[at].name == "ping" {
				at++ // clients skip pings unparsed, so garbling one would prove nothing
			}
		}
		if f.FlushHeaders {
			w.WriteHeader(http.StatusOK)
			_ = rc.Flush()
		}
	}
	for i := 0; i <= len(events); i++ {
		if i == at && f.Kind == FaultEndless {
			ev := events[min(i, len(events)-1)]
			h.endless(r.Context(), rc, func() (int, error) { return len(ev.data), writeEvent(w, ev) })
		}
		if i == at && f.Kind != FaultMalformed {
			h.strike(r.Context(), f)
		}
		if i == len(events) {
			return
		}
		if i > 0 && !h.pause(r.Context(), delay) {
			panic(http.ErrAbortHandler)
		}
		ev := events[i]
		if i == at {
			ev.data = ev.data[:max(1, len(ev.data)/2)] // a strict prefix of a JSON value is never valid JSON
		}
		if err := writeEvent(w, ev); err != nil {
			return // the client went away
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

func writeEvent(w io.Writer, ev sseEvent) error {
	var err error
	if ev.name != "" {
		_, err = fmt.Fprintf(w, "event: %s\n", ev.name)
	}
	if err == nil {
		_, err = fmt.Fprintf(w, "data: %s\n\n", ev.data)
	}
	return err
}

// respond writes a non-streaming JSON reply, applying the fault.
func (h *Handler) respond(w http.ResponseWriter, r *http.Request, body []byte, f *Fault) {
	w.Header().Set("Content-Type", "application/json")
	if f == nil {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
		return
	}
	half := body[:len(body)/2]
	if f.Kind == FaultMalformed {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(half)
		return
	}
	rc := http.NewResponseController(w)
	if f.Kind == FaultEndless {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(half)
		pad := bytes.Repeat([]byte(" "), 64<<10)
		h.endless(r.Context(), rc, func() (int, error) { return w.Write(pad) })
	}
	if f.FlushHeaders || f.AfterChunks > 0 {
		w.WriteHeader(http.StatusOK)
		if f.AfterChunks > 0 {
			_, _ = w.Write(half)
		}
		_ = rc.Flush()
	}
	h.strike(r.Context(), f)
}

// endlessLimit bounds an endless fault, so a client that never stops
// reading cannot keep the server writing for ever either.
const endlessLimit = 1 << 30

// endless calls write again and again until the client goes away, the
// server closes or endlessLimit bytes went out, then aborts the connection.
func (h *Handler) endless(ctx context.Context, rc *http.ResponseController, write func() (int, error)) {
	for sent := 0; sent < endlessLimit; {
		select {
		case <-ctx.Done():
			panic(http.ErrAbortHandler)
		case <-h.done:
			panic(http.ErrAbortHandler)
		default:
		}
		n, err := write()
		if err != nil || rc.Flush() != nil {
			panic(http.ErrAbortHandler)
		}
		sent += n
	}
	panic(http.ErrAbortHandler)
}

// strike applies a cut or a hang; both end by aborting the connection so the
// client never sees a well-formed end of the response.
func (h *Handler) strike(ctx context.Context, f *Fault) {
	if f.Kind == FaultHang {
		select {
		case <-ctx.Done():
		case <-h.done:
		}
	}
	panic(http.ErrAbortHandler)
}

// pause sleeps between events; false means the client left or the server closed.
func (h *Handler) pause(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-h.done:
		return false
	}
}

// fail answers with the API's error format.
func (h *Handler) fail(w http.ResponseWriter, api string, status int, msg, reqID, retryAfter string) {
	setRequestID(w.Header(), api, reqID)
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	switch api {
	case APIMessages:
		writeJSON(w, status, anthropicError(status, msg, reqID))
	case APIGemini:
		writeJSON(w, status, geminiError(status, msg))
	default:
		writeJSON(w, status, openAIError(status, msg))
	}
}

func setRequestID(h http.Header, api, id string) {
	if api == APIMessages {
		h.Set("Request-Id", id)
		return
	}
	h.Set("X-Request-Id", id)
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// models lists the models the script names, in the shape of the API the
// client speaks (Anthropic clients send anthropic-version, Gemini clients
// ask under /v1beta).
func (h *Handler) models(w http.ResponseWriter, r *http.Request) {
	names := []string{"mockllm"}
	seen := map[string]bool{"mockllm": true}
	for _, rule := range h.rules {
		if m := rule.When.Model; m != "" && !seen[m] {
			seen[m] = true
			names = append(names, m)
		}
	}
	if strings.HasPrefix(r.URL.Path, "/v1beta/") {
		var models []obj
		for _, n := range names {
			models = append(models, obj{{"name", "models/" + n}, {"displayName", n},
				{"supportedGenerationMethods", []string{"generateContent", "streamGenerateContent", "countTokens"}}})
		}
		writeJSON(w, http.StatusOK, mustJSON(obj{{"models", models}}))
		return
	}
	var data []obj
	anthropic := r.Header.Get("Anthropic-Version") != ""
	for _, n := range names {
		if anthropic {
			data = append(data, obj{{"type", "model"}, {"id", n}, {"display_name", n}, {"created_at", "2025-01-01T00:00:00Z"}})
			continue
		}
		data = append(data, obj{{"id", n}, {"object", "model"}, {"created", created}, {"owned_by", "mockllm"}})
	}
	if anthropic {
		writeJSON(w, http.StatusOK, mustJSON(obj{{"data", data}, {"has_more", false},
			{"first_id", names[0]}, {"last_id", names[len(names)-1]}}))
		return
	}
	writeJSON(w, http.StatusOK, mustJSON(obj{{"object", "list"}, {"data", data}}))
}

// chatIncludeUsage reports stream_options.include_usage; real servers send
// the usage chunk only when asked, and some clients index choices[0] of
// every chunk otherwise.
func chatIncludeUsage(body []byte) bool {
	var req chatRequest
	return json.Unmarshal(body, &req) == nil && req.StreamOptions.IncludeUsage
}

// digest is a short hex digest of a request body: the stem of generated ids.
func digest(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:12])
}
