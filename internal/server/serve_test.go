package server

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runnel/runnel"
)

// closeNotifyListener reports when Serve stops accepting.
type closeNotifyListener struct {
	net.Listener
	once   sync.Once
	closed chan struct{}
}

func (l *closeNotifyListener) Close() error {
	err := l.Listener.Close()
	l.once.Do(func() { close(l.closed) })
	return err
}

type served struct {
	url    string
	closed <-chan struct{}
	wait   func() error // Serve's answer
	client *http.Client
}

// startServe runs srv.Serve on a loopback port until the returned cancel.
func startServe(t *testing.T, srv *Server) (*served, context.CancelFunc) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nl := &closeNotifyListener{Listener: ln, closed: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, nl) }()
	wait := sync.OnceValue(func() error { return recv(t, done, "Serve to return") })
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(func() {
		cancel()
		_ = wait()
		client.CloseIdleConnections()
	})
	return &served{url: "http://" + ln.Addr().String(), closed: nl.closed, wait: wait, client: client}, cancel
}

type answer struct {
	status int
	body   string
	err    error
}

// post sends a run in the background. It is tied to the test's context,
// so a failed test disconnects and its run's handler can return.
func post(ctx context.Context, client *http.Client, url string) <-chan answer {
	ch := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/run", strings.NewReader(hiRequest))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			ch <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		ch <- answer{resp.StatusCode, string(b), err}
	}()
	return ch
}

func TestServeLetsInFlightRunsFinish(t *testing.T) {
	started, release, ended := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	srv := New(runnerFunc(func(ctx context.Context, _ *runnel.RunRequest, _ runnel.Sink) (*runnel.Result, error) {
		close(started)
		select { // a failed test disconnects (post), which cancels ctx
		case <-release:
		case <-ctx.Done():
		}
		ended <- ctx.Err()
		return &runnel.Result{OK: true, Status: runnel.StatusCompleted, Output: "finished"}, nil
	}), &Options{ShutdownGrace: time.Hour})
	s, stop := startServe(t, srv)
	got := post(t.Context(), s.client, s.url)
	recv(t, started, "the run to start")
	stop()
	recv(t, s.closed, "the listener to close")
	if _, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://")); err == nil {
		t.Error("a new connection was accepted while draining")
	}
	close(release)
	a := recv(t, got, "the answer")
	if a.err != nil || a.status != http.StatusOK || !strings.Contains(a.body, `"output":"finished"`) {
		t.Errorf("in-flight run answered %d %q %v, want 200 with its result", a.status, a.body, a.err)
	}
	if err := recv(t, ended, "the run"); err != nil {
		t.Errorf("the run was cancelled (%v) within the grace period", err)
	}
	if err := s.wait(); err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// For ShutdownDelay after the signal a replica goes on serving, on the
// connections a balancer keeps alive and on new ones, while /health tells
// the balancer to take it out; each answer closes its connection. Closing
// a kept-alive connection at once would fail a run sent on it just then.
func TestServeKeepsServingForTheShutdownDelay(t *testing.T) {
	srv := New(runnerFunc(func(context.Context, *runnel.RunRequest, runnel.Sink) (*runnel.Result, error) {
		return &runnel.Result{OK: true, Status: runnel.StatusCompleted, Output: "done"}, nil
	}), &Options{ShutdownDelay: 3 * time.Second})
	s, stop := startServe(t, srv)
	if a := recv(t, post(t.Context(), s.client, s.url), "the first answer"); a.status != http.StatusOK {
		t.Fatalf("before the signal: %d %q %v", a.status, a.body, a.err)
	}
	stop()
	for deadline := time.Now().Add(10 * time.Second); !srv.draining.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Serve did not start draining")
		}
	}

	var reused bool
	ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused },
	})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/run", strings.NewReader(hiRequest))
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("a run on the kept-alive connection while draining: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"output":"done"`) || !reused || !resp.Close {
		t.Errorf("while draining: %d %s (reused connection %v, closed after %v), want 200 with the result on the kept-alive connection, which it then closes",
			resp.StatusCode, body, reused, resp.Close)
	}

	resp, err = http.Get(s.url + "/health")
	if err != nil {
		t.Fatalf("a new connection while draining: %v", err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"status":"draining"`) {
		t.Errorf("/health while draining: %d %s, want 503 draining", resp.StatusCode, body)
	}
	if err := s.wait(); err != nil {
		t.Errorf("Serve: %v", err)
	}
	recv(t, s.closed, "the listener to close")
}

func TestServeCancelsRunsAfterTheGrace(t *testing.T) {
	started, ended := make(chan struct{}), make(chan error, 1)
	srv := New(blockingRunner(started, ended), &Options{ShutdownGrace: time.Nanosecond})
	s, stop := startServe(t, srv)
	got := post(t.Context(), s.client, s.url)
	recv(t, started, "the run to start")
	stop()
	if err := recv(t, ended, "the run to end"); !errors.Is(err, context.Canceled) {
		t.Errorf("run ended with %v, want context.Canceled", err)
	}
	a := recv(t, got, "the answer")
	if a.err != nil || a.status != http.StatusServiceUnavailable || !strings.Contains(a.body, `"status":"cancelled"`) {
		t.Errorf("cancelled run answered %d %q %v, want 503 with a cancelled result", a.status, a.body, a.err)
	}
	if err := s.wait(); err != nil {
		t.Errorf("Serve: %v", err)
	}
}

func TestServeReportsAListenerFailure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	err = New(helloRunner(), nil).Serve(t.Context(), ln)
	if err == nil || !strings.Contains(err.Error(), "serving on 127.0.0.1:") {
		t.Errorf("Serve on a closed listener: %v", err)
	}
}
