package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/uistream"
)

// Profile is a server-side run profile (RUNNEL_PROFILES_FILE): the run
// fields a /v1/chat request that names it runs with, so that a browser
// never holds a provider key or picks where tools call.
type Profile struct {
	Name  string `json:"name"`
	Label string `json:"label,omitempty"`
	// Model is what /v1/profiles shows; the run's model is Run's.
	Model   string `json:"model,omitempty"`
	Default bool   `json:"default"`
	// Run returns a fresh copy of the profile's run fields, secrets
	// included, for one request to own.
	Run func() (*runnel.RunRequest, error) `json:"-"`
}

// compatHeader names the profile (ai5, ai6, ai7) like the compat field.
const compatHeader = "X-Runnel-Compat"

// handleChat serves POST /v1/chat (DESIGN §3.6): the useChat transport
// body in, the run answered as an AI SDK UI Message Stream. Like NDJSON,
// only what is decided before the run (undecodable JSON, authentication,
// size, capacity) keeps its HTTP status; every other refusal comes inside
// the stream as an error chunk, which useChat shows to the person.
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	// A browser sends a cross-site JSON POST only after a CORS preflight,
	// which runnel never grants; a form or text/plain POST it sends
	// without one. Requiring JSON keeps other sites from starting runs
	// (with a profile's key) through a visitor's browser.
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		s.writeError(w, r, &runnel.Error{Code: codeUnsupportedMedia,
			Message: "POST /v1/chat takes a JSON body; send Content-Type: application/json"})
		return
	}
	var chat *uistream.ChatRequest
	if !s.readBody(w, r, func(body io.Reader) error {
		raw, err := readBody(body, s.opts.MaxBodyBytes, `send the useChat transport body, such as {"id":"chat-1","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"hi"}]}]}`)
		if err != nil {
			return err
		}
		if chat, err = uistream.Decode(raw); err != nil {
			return invalidJSON(err)
		}
		return nil
	}) {
		return
	}
	release, ok := s.takeSlot(w, r)
	if !ok {
		return
	}
	defer release()
	plan, planErr := s.chatPlan(r, chat)
	if planErr != nil {
		// Refused before the run: the stream says why, in the profile
		// asked for when it could be read.
		plan.req = &runnel.RunRequest{SessionID: chat.ID}
		plan.stream.MessageID = newMessageID()
	}
	// POST /kill for the run's session (the chat id, unless the run
	// fields name one) cancels it like a client that left.
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	defer s.live.add(plan.req, cancel)()
	sw := &sseWriter{lineWriter: lineWriter{w: w, last: time.Now()}, st: uistream.NewStream(plan.stream)}
	res, _ := s.runStreamed(ctx, cancel, w, r, &sw.lineWriter, sseBeat, sseHeaders, func(ctx context.Context) (*runnel.Result, error) {
		sw.begin()
		if planErr != nil {
			return nil, planErr
		}
		return s.run(ctx, plan.req, sw)
	})
	s.finishStream(w, r, sw.end(res))
}

// newMessageID names a new assistant message.
func newMessageID() string { return "msg_" + NewRequestID() }

// chatPlan is a /v1/chat request made ready to run.
type chatPlan struct {
	req    *runnel.RunRequest
	stream uistream.Options
}

// chatPlan resolves the compat profile, the run profile and the
// conversation. A plan is returned with its compat profile even with an
// error, so the refusal is written in the client's dialect.
func (s *Server) chatPlan(r *http.Request, chat *uistream.ChatRequest) (*chatPlan, error) {
	plan := &chatPlan{stream: uistream.Options{Profile: uistream.DefaultProfile}}
	compat := chat.Compat
	if h := r.Header.Get(compatHeader); h != "" {
		if compat != "" && compat != h {
			return plan, runnel.Errorf(runnel.CodeInvalidRequest, "the compat field says %q and the %s header %q; send one of them", compat, compatHeader, h)
		}
		compat = h
	}
	p, err := uistream.ParseProfile(compat)
	if err != nil {
		return plan, runnel.Errorf(runnel.CodeInvalidRequest, "%w", err)
	}
	plan.stream.Profile = p
	req, err := s.runFields(chat)
	if err != nil {
		return plan, err
	}
	isClient := func(name string) bool {
		for i := range req.CustomTools {
			if t := &req.CustomTools[i]; t.Name == name {
				return t.EffectiveKind() == runnel.ToolKindClient
			}
		}
		return false
	}
	conv, err := uistream.Convert(chat.Messages, isClient)
	if err != nil {
		return plan, runnel.Errorf(runnel.CodeInvalidRequest, "%w", err)
	}
	req.Messages = conv.Messages
	if req.SessionID == "" {
		req.SessionID = chat.ID // so POST /kill {sessionId: <chat id>} stops it
	}
	plan.req = req
	plan.stream.Conversation = conv
	// The frontend declares the client tools it fulfils; every other tool
	// is shown dynamic, so a useChat app need not know the server's tools.
	plan.stream.Static = isClient
	plan.stream.MessageID = conv.Continued
	if plan.stream.MessageID == "" {
		plan.stream.MessageID = newMessageID()
	}
	return plan, nil
}

// runFields returns the run fields of a chat request: a named profile's
// (or the default profile's, when the body has no run field), else the
// body's own. With a profile the body may carry no run field: it would
// let a browser redirect a profile's key or tools.
func (s *Server) runFields(chat *uistream.ChatRequest) (*runnel.RunRequest, error) {
	given := setRunFields(&chat.RunRequest)
	name := chat.Profile
	if name == "" && len(given) == 0 {
		for _, p := range s.opts.Profiles {
			if p.Default {
				name = p.Name
			}
		}
	}
	if name == "" {
		req := chat.RunRequest
		return &req, nil
	}
	i := slices.IndexFunc(s.opts.Profiles, func(p Profile) bool { return p.Name == name })
	if i < 0 {
		names := make([]string, 0, len(s.opts.Profiles))
		for _, p := range s.opts.Profiles {
			names = append(names, fmt.Sprintf("%q", p.Name))
		}
		if len(names) == 0 {
			return nil, runnel.Errorf(runnel.CodeInvalidRequest, "profile %q is not known: this server has no run profiles (RUNNEL_PROFILES_FILE); send the run fields instead", name)
		}
		return nil, runnel.Errorf(runnel.CodeInvalidRequest, "profile %q is not one of this server's run profiles (%s)", name, strings.Join(names, ", "))
	}
	if len(given) > 0 {
		return nil, runnel.Errorf(runnel.CodeInvalidRequest, "profile %q fixes the run's fields; remove %s from the request", name, strings.Join(given, ", "))
	}
	req, err := s.opts.Profiles[i].Run()
	if err != nil {
		return nil, fmt.Errorf("profile %q: %w", name, err)
	}
	return req, nil
}

// setRunFields names the run fields the body set (by their JSON names).
func setRunFields(req *runnel.RunRequest) []string {
	var out []string
	v := reflect.ValueOf(req).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "messages" && !v.Field(i).IsZero() {
			out = append(out, name)
		}
	}
	return out
}

// handleProfiles serves GET /v1/profiles: what a model picker shows.
func (s *Server) handleProfiles(w http.ResponseWriter, r *http.Request) {
	profiles := s.opts.Profiles
	if profiles == nil {
		profiles = []Profile{}
	}
	s.writeJSON(w, r, http.StatusOK, struct {
		Profiles []Profile `json:"profiles"`
	}{profiles})
}

// sseWriter writes a run as UI Message Stream chunks, one server-sent
// event each. It is a runnel.Sink.
type sseWriter struct {
	lineWriter
	st *uistream.Stream
}

// Emit writes the chunks of one event in one write.
func (s *sseWriter) Emit(e runnel.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writeChunksLocked(s.st.Event(e))
}

// begin writes the start chunk.
func (s *sseWriter) begin() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writeChunksLocked(s.st.Start())
}

// end writes the result's chunks and [DONE], and closes the writer.
func (s *sseWriter) end(res *runnel.Result) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writeChunksLocked(s.st.Finish(res))
	s.writeLocked([]byte("data: [DONE]\n\n"), http.StatusOK)
	s.closed = true
	return s.err
}

func (s *sseWriter) writeChunksLocked(chunks []uistream.Chunk) {
	if len(chunks) == 0 {
		return
	}
	var b []byte
	for _, c := range chunks {
		line, err := json.Marshal(c)
		if err != nil {
			s.fail(fmt.Errorf("encoding a %s chunk: %w", c.Type, err))
			continue
		}
		b = append(b, "data: "...)
		b = append(append(b, line...), "\n\n"...)
	}
	s.writeLocked(b, http.StatusOK)
}

// sseBeat is an SSE comment, which every event-stream reader skips.
const sseBeat = ": keep-alive\n\n"

func sseHeaders(h http.Header) {
	h.Set("Content-Type", "text/event-stream")
	h.Set("Connection", "keep-alive")
	h.Set("X-Vercel-AI-UI-Message-Stream", "v1")
}
