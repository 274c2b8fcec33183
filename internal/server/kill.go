package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/strictjson"
)

// maxKillBody bounds a /kill body: two ids.
const maxKillBody = 16 << 10

// errKilled is the cause of a run cancelled by POST /kill.
var errKilled = errors.New("the run's session was killed (POST /kill)")

// sessionKey names the runs of one session of one project.
type sessionKey struct{ project, session string }

// liveRuns are the runs in progress on this replica by session, so
// POST /kill can cancel a session's runs. It is safe for concurrent use.
type liveRuns struct {
	mu   sync.Mutex
	runs map[sessionKey]map[*context.CancelCauseFunc]struct{}
}

// add registers a run's cancel under its session and returns the
// function that unregisters it. A run without a session id cannot be
// killed by session and is not registered.
func (l *liveRuns) add(req *runnel.RunRequest, cancel context.CancelCauseFunc) func() {
	if req.SessionID == "" {
		return func() {}
	}
	k := sessionKey{req.ProjectID, req.SessionID}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.runs == nil {
		l.runs = map[sessionKey]map[*context.CancelCauseFunc]struct{}{}
	}
	if l.runs[k] == nil {
		l.runs[k] = map[*context.CancelCauseFunc]struct{}{}
	}
	l.runs[k][&cancel] = struct{}{}
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.runs[k], &cancel)
		if len(l.runs[k]) == 0 {
			delete(l.runs, k)
		}
	}
}

// kill cancels the session's runs and reports how many there were.
func (l *liveRuns) kill(k sessionKey) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	for cancel := range l.runs[k] {
		(*cancel)(errKilled)
	}
	return len(l.runs[k])
}

// kill serves POST /kill {sessionId, projectId}: it cancels that session's
// runs on this replica (other replicas keep theirs; a platform asks each)
// and answers {ok: true, killed: n}. A killed run ends as cancelled, its
// processes and sessions torn down like a disconnected client's.
func (s *Server) kill(w http.ResponseWriter, r *http.Request) {
	var body struct {
		SessionID string `json:"sessionId"`
		ProjectID string `json:"projectId"`
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxKillBody))
	if err == nil {
		err = strictjson.Unmarshal(raw, &body)
	}
	if err != nil || strings.TrimSpace(body.SessionID) == "" {
		s.writeError(w, r, &runnel.Error{Code: runnel.CodeInvalidRequest,
			Message: `POST /kill takes {"sessionId": "…", "projectId": "…"} with the session whose runs to cancel`})
		return
	}
	n := s.live.kill(sessionKey{body.ProjectID, body.SessionID})
	s.writeJSON(w, r, http.StatusOK, struct {
		OK     bool `json:"ok"`
		Killed int  `json:"killed"`
	}{true, n})
}
