package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/runnel/runnel"
)

// TestKillEndsASessionsRuns: POST /kill cancels the runs of that session
// (and project) on this replica, and only those.
func TestKillEndsASessionsRuns(t *testing.T) {
	started := make(chan string, 2)
	ended := make(chan error, 2)
	ts := newTestServer(t, runnerFunc(func(ctx context.Context, req *runnel.RunRequest, _ runnel.Sink) (*runnel.Result, error) {
		started <- req.SessionID
		<-ctx.Done()
		ended <- context.Cause(ctx)
		return &runnel.Result{Status: runnel.StatusCancelled, ErrorCode: runnel.CodeCancelled}, nil
	}), nil)
	answers := make(chan int, 2)
	for _, body := range []string{
		`{"model":"m","sessionId":"s1","projectId":"p1","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","sessionId":"s1","projectId":"p2","messages":[{"role":"user","content":"hi"}]}`,
	} {
		go func() {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.URL+"/run", strings.NewReader(body))
			resp, err := ts.Client().Do(req)
			if err != nil {
				answers <- 0
				return
			}
			resp.Body.Close()
			answers <- resp.StatusCode
		}()
	}
	recv(t, started, "the first run")
	recv(t, started, "the second run")

	resp, body := do(t, ts, http.MethodPost, "/kill", `{"sessionId":"s1","projectId":"p1"}`)
	if resp.StatusCode != http.StatusOK || string(body) != `{"ok":true,"killed":1}`+"\n" {
		t.Fatalf("kill answered %d %s, want 200 {ok:true, killed:1}", resp.StatusCode, body)
	}
	if err := recv(t, ended, "the killed run to end"); !errors.Is(err, errKilled) {
		t.Errorf("the run ended because of %v, want errKilled", err)
	}
	if got := recv(t, answers, "the killed run's answer"); got != http.StatusServiceUnavailable {
		t.Errorf("the killed run answered %d, want 503 (cancelled)", got)
	}
	select {
	case err := <-ended:
		t.Fatalf("the other project's run ended too (%v)", err)
	default:
	}

	for _, bad := range []string{`{}`, `{"projectId":"p1"}`, `not json`, `{"sessionId":"s1","sessionId":"s2"}`} {
		if resp, body := do(t, ts, http.MethodPost, "/kill", bad); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("kill %s answered %d %s, want 400", bad, resp.StatusCode, body)
		}
	}
	if resp, body := do(t, ts, http.MethodPost, "/kill", `{"sessionId":"nobody","projectId":"p1"}`); string(body) != `{"ok":true,"killed":0}`+"\n" {
		t.Errorf("kill of an unknown session answered %d %s", resp.StatusCode, body)
	}
	// The other run ends with the test (its client's context).
}

// TestSubscriptionStatus: Agenta asks a runner which harness logins it
// holds, and calls one that answers 404 incompatible.
func TestSubscriptionStatus(t *testing.T) {
	ts := newTestServer(t, helloRunner(), &Options{Token: "tok-0123456789"})
	if resp, _ := do(t, ts, http.MethodGet, "/subscription-status", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the token: %d, want 401", resp.StatusCode)
	}
	resp, body := do(t, ts, http.MethodGet, "/subscription-status", "", "Authorization", "Bearer tok-0123456789")
	if resp.StatusCode != http.StatusOK || string(body) != `{"version":1,"harnesses":{}}`+"\n" {
		t.Errorf("%d %s, want 200 and no harness logins", resp.StatusCode, body)
	}
}
