package run

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/llmtest"
)

// The fault matrix (issue 14): each way the world around a run fails is
// played by a real server on loopback (the scripted model speaking each
// API's stream, the platform's tool callback, an MCP server), and the run
// goes through runnel's HTTP front door as a platform sends it. Every case
// checks three things:
//
//   - the run says what went wrong: its terminal error event and result,
//     or the tool result the model read and went on from;
//   - it ends within faultBound, far above every deadline the cases set,
//     which only turns a hang into a failure (no case asserts a speed);
//   - it leaves nothing running (nothingLeft): the servers see runnel let
//     go of every request, and once they are closed no goroutine, file
//     descriptor or workspace of the run is left.
//
// The client's faults (a disconnect, a reader that stops) and SIGTERM are
// in cmd/runnel/faults_test.go, against the daemon.

// faultBound bounds every wait of these tests; see above.
const faultBound = 30 * time.Second

// nothingLeft snapshots the process and, when the test ends (after every
// cleanup registered later, which closes the test's servers), checks that
// no goroutine started since is left, the process holds no more file
// descriptors than before, and root, the workspace root, is empty. Call
// it first in a test.
func nothingLeft(t *testing.T, root string) {
	t.Helper()
	goroutines := goleak.IgnoreCurrent()
	fds := openFDs(t)
	t.Cleanup(func() {
		goleak.VerifyNone(t, goroutines)
		// Descriptors close as the goroutines holding them unwind; the
		// wait only turns a leak into a failure.
		var now []string
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if now = openFDs(t); len(now) <= len(fds) || time.Now().After(deadline) {
				break
			}
		}
		if len(now) > len(fds) {
			t.Errorf("%d file descriptors open after the run, %d before; now open: %q", len(now), len(fds), now)
		}
		if left, _ := os.ReadDir(root); len(left) > 0 {
			t.Errorf("workspaces left under %s: %v", root, left)
		}
	})
}

// openFDs lists what the process's file descriptors point at.
func openFDs(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count file descriptors: %v", err)
	}
	var out []string
	for _, e := range entries {
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		out = append(out, e.Name()+" "+target)
	}
	return out
}

// inflight counts the requests a server is answering, so a test can see
// runnel let go of them (a request runnel abandoned but kept open would
// only end when the server closes).
type inflight struct{ n atomic.Int32 }

// wrap counts h's requests. It reads each request's body before h runs,
// as a real server does before it works: net/http notices a client that
// hung up only once the body has been read.
func (f *inflight) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.n.Add(1)
		defer f.n.Add(-1)
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	})
}

// settled waits until no request is in flight.
func (f *inflight) settled(t *testing.T, who string) {
	t.Helper()
	deadline := time.Now().Add(faultBound)
	for f.n.Load() != 0 {
		if time.Now().After(deadline) {
			t.Errorf("%s is still answering %d request(s) of the ended run", who, f.n.Load())
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// serveTracked serves h on loopback for the rest of the test, counting
// its requests in flight.
func serveTracked(t *testing.T, h http.Handler) (*httptest.Server, *inflight) {
	t.Helper()
	f := &inflight{}
	s := httptest.NewServer(f.wrap(h))
	t.Cleanup(s.Close)
	return s, f
}

// modelServer is the scripted model behind a tracked server.
type modelServer struct {
	*inflight
	url string
	h   *llmtest.Handler
}

func newModelServer(t *testing.T, s llmtest.Script) *modelServer {
	t.Helper()
	h := llmtest.NewHandler(s)
	srv, f := serveTracked(t, h)
	// Registered after the server's Close, so it runs first: it releases
	// the handler's hangs, which would otherwise hold Close.
	t.Cleanup(h.Close)
	return &modelServer{inflight: f, url: srv.URL, h: h}
}

// request is a run of api against the model, with read granted so that
// the run has a workspace to leave behind or not.
func (s *modelServer) request(api, prompt string) *runnel.RunRequest {
	req := baseRequest(&llmtest.Server{URL: s.url}, api, prompt) // it reads only the URL
	req.Tools = []string{"read"}
	return req
}

// runWithin runs req on r, failing the test if it does not end within
// faultBound.
func runWithin(t *testing.T, r runner, req *runnel.RunRequest) (*runnel.Result, *recorder) {
	t.Helper()
	rec := &recorder{}
	type outcome struct {
		res *runnel.Result
		err error
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan outcome, 1)
	go func() {
		res, err := r.Run(ctx, req, rec)
		done <- outcome{res, err}
	}()
	select {
	case o := <-done:
		if o.err != nil {
			t.Fatalf("the run was refused: %v", o.err)
		}
		return o.res, rec
	case <-time.After(faultBound):
		cancel()
		<-done
		t.Fatalf("the run did not end within %s", faultBound)
		return nil, nil
	}
}

// failedWith checks that a run failed with code, its error saying want,
// and that its stream ended with the same error and done.
func failedWith(t *testing.T, res *runnel.Result, rec *recorder, code runnel.ErrorCode, want string) {
	t.Helper()
	if res.OK || res.Status != runnel.StatusFailed || res.ErrorCode != code || !strings.Contains(res.Error, want) {
		t.Errorf("result: ok %v status %q code %q error %q; want failed, %s, saying %q", res.OK, res.Status, res.ErrorCode, res.Error, code, want)
	}
	s := rec.summary()
	end := []string{"error " + string(res.ErrorCode) + ": " + res.Error, "done " + runnel.StopError}
	if len(s) < 2 || !slices.Equal(s[len(s)-2:], end) {
		t.Errorf("the stream ended %q, want %q", s[max(0, len(s)-2):], end)
	}
}

// TestProviderFaults: a model API that fails every way a real one does.
// The run fails with a sentence naming the failure; none is a hang.
func TestProviderFaults(t *testing.T) {
	long := strings.Repeat("All work and no play. ", 100)
	tests := []struct {
		name  string
		rules []llmtest.Rule
		// model, when set, replaces the scripted model with a server of
		// the test's own.
		model func(t *testing.T) (url string, f *inflight)
		// apis are the APIs the fault applies to; nil means all.
		apis   []string
		opts   Options
		limits *runnel.Limits
		// code and want are the run's failure; code "" means it completes
		// with want as its output.
		code     runnel.ErrorCode
		want     string
		requests int // the model requests runnel made, when checked
		// waited is how long the run must have taken at least: what the
		// server asked it to wait.
		waited time.Duration
	}{{
		name: "429 with Retry-After, then an answer",
		rules: []llmtest.Rule{{Reply: llmtest.Reply{Text: "finally"},
			Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 429, RetryAfter: "1", Times: 1}}},
		// The backoff alone would retry after a millisecond.
		opts: Options{ProviderBackoff: time.Millisecond},
		want: "finally", requests: 2, waited: time.Second,
	}, {
		name: "429 asking for longer than the run has left",
		rules: []llmtest.Rule{{Reply: llmtest.Reply{Text: "never"},
			Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 429, RetryAfter: "3600"}}},
		// It fails at once, saying why, rather than at its deadline.
		limits: &runnel.Limits{TotalTimeoutMs: 20_000},
		code:   runnel.CodeProviderError, requests: 1,
		want: "HTTP 429: llmtest: scripted 429 from rule 0 (after 1 attempt); the next attempt would have waited 30s, past the run's deadline",
	}, {
		name:  "500 on every attempt",
		rules: []llmtest.Rule{{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 500}}},
		opts:  Options{ProviderAttempts: 2, ProviderBackoff: time.Millisecond},
		code:  runnel.CodeProviderError, want: "HTTP 500", requests: 2,
	}, {
		name: "stream cut mid-answer",
		rules: []llmtest.Rule{{Reply: llmtest.Reply{Text: long, ChunkSize: 8},
			Fault: &llmtest.Fault{Kind: llmtest.FaultCut, AfterChunks: 8}}},
		code: runnel.CodeProviderError, want: "the stream broke off", requests: 1,
	}, {
		name: "malformed chunk",
		rules: []llmtest.Rule{{Reply: llmtest.Reply{Text: long, ChunkSize: 8},
			Fault: &llmtest.Fault{Kind: llmtest.FaultMalformed, AfterChunks: 8}}},
		code: runnel.CodeProviderError, want: "malformed", requests: 1,
	}, {
		// Every chunk comes well within the idle timeout, so only the
		// run's own deadline can end it.
		name:   "slow loris: an answer that drips for ever",
		rules:  []llmtest.Rule{{Reply: llmtest.Reply{Text: long, ChunkSize: 1, TokenDelayMs: 20}}},
		limits: &runnel.Limits{TotalTimeoutMs: 1000},
		code:   runnel.CodeTimeout, want: "The run exceeded its total timeout of 1s.",
	}, {
		// The first-token deadline covers the response's head too.
		name:  "slow loris: a status line a byte at a time",
		apis:  []string{APIOpenAIChat}, // the fault is below the API
		model: dribbler,
		opts:  Options{ProviderAttempts: 1, FirstTokenTimeout: 500 * time.Millisecond},
		code:  runnel.CodeTimeout, want: "the model sent nothing for 500ms (first-token timeout), after 1 attempt",
	}, {
		name:  "hang before the response",
		rules: []llmtest.Rule{{Fault: &llmtest.Fault{Kind: llmtest.FaultHang}}},
		opts:  Options{ProviderAttempts: 2, ProviderBackoff: time.Millisecond, FirstTokenTimeout: 300 * time.Millisecond},
		code:  runnel.CodeTimeout, want: "the model sent nothing for 300ms (first-token timeout), after 2 attempts", requests: 2,
	}, {
		name: "hang mid-answer",
		rules: []llmtest.Rule{{Reply: llmtest.Reply{Text: long, ChunkSize: 8},
			Fault: &llmtest.Fault{Kind: llmtest.FaultHang, AfterChunks: 8}}},
		opts: Options{IdleTimeout: 300 * time.Millisecond},
		code: runnel.CodeTimeout, want: "the model sent nothing for 300ms (idle timeout), after 1 attempt", requests: 1,
	}, {
		name: "endless answer",
		rules: []llmtest.Rule{{Reply: llmtest.Reply{Text: long, ChunkSize: 8},
			Fault: &llmtest.Fault{Kind: llmtest.FaultEndless, AfterChunks: 8}}},
		opts: Options{MaxStepBytes: 1 << 20},
		code: runnel.CodeProviderError, want: "went past 1 MiB, the most one step may stream", requests: 1,
	}, {
		// Event 1 is Responses' response.in_progress and Anthropic's
		// ping: a stream of them carries no answer, so it is silence.
		name: "endless events that carry no answer",
		apis: []string{APIOpenAIResponses, APIAnthropic},
		rules: []llmtest.Rule{{Reply: llmtest.Reply{Text: long},
			Fault: &llmtest.Fault{Kind: llmtest.FaultEndless, AfterChunks: 1}}},
		opts: Options{ProviderAttempts: 1, FirstTokenTimeout: 300 * time.Millisecond},
		code: runnel.CodeTimeout, want: "the model sent nothing for 300ms (first-token timeout), after 1 attempt", requests: 1,
	}}
	for _, tt := range tests {
		for _, api := range apis {
			if tt.apis != nil && !slices.Contains(tt.apis, api) {
				continue
			}
			t.Run(tt.name+"/"+api, func(t *testing.T) {
				root := t.TempDir()
				nothingLeft(t, root)
				llm := newModelServer(t, llmtest.Script{Rules: tt.rules})
				url, model := llm.url, llm.inflight
				if tt.model != nil {
					url, model = tt.model(t)
				}
				opts := tt.opts
				opts.WorkspaceRoot = root
				req := (&modelServer{url: url}).request(api, "Tell me a story")
				req.Limits = tt.limits
				start := time.Now()
				res, rec := runWithin(t, overHTTP(t, NewManager(&opts)), req)
				if tt.code == "" {
					if !res.OK || res.Output != tt.want {
						t.Errorf("result: ok %v output %q error %q; want %q", res.OK, res.Output, res.Error, tt.want)
					}
				} else {
					failedWith(t, res, rec, tt.code, tt.want)
				}
				if strings.Contains(string(rec.json(t))+res.Error, openAIKey) || strings.Contains(string(rec.json(t))+res.Error, anthropicKey) {
					t.Error("the API key reached the stream")
				}
				if n := len(llm.h.Requests()); tt.requests != 0 && n != tt.requests {
					t.Errorf("runnel made %d model requests, want %d", n, tt.requests)
				}
				if took := time.Since(start); took < tt.waited {
					t.Errorf("the run took %s, less than the %s the server asked it to wait", took, tt.waited)
				}
				model.settled(t, "the model server")
			})
		}
	}
}

// dribbler is a model server that answers every request with a status
// line sent one byte every 50 ms, and then header lines the same way, for
// ever: it never gets to a body.
func dribbler(t *testing.T) (string, *inflight) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &inflight{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			f.n.Add(1)
			wg.Go(func() {
				defer f.n.Add(-1)
				defer c.Close()
				br := bufio.NewReader(c)
				for { // the request's head; its body can stay unread
					line, err := br.ReadString('\n')
					if err != nil {
						return
					}
					if line == "\r\n" {
						break
					}
				}
				head := "HTTP/1.1 200 OK\r\n"
				for i := 0; ; i++ {
					b := byte('a')
					if i < len(head) {
						b = head[i]
					} else if (i-len(head))%16 == 15 {
						b = '\n' // "aaaa…a\n": a header line, never a blank one
					}
					if _, err := c.Write([]byte{b}); err != nil {
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "http://" + ln.Addr().String(), f
}

// TestCallbackFaults: a platform whose tool endpoint fails. A tool's
// failure is a result for the model (DESIGN §4.2), so the run goes on and
// completes with the sentence the model read.
func TestCallbackFaults(t *testing.T) {
	tests := []struct {
		name   string
		answer func(w http.ResponseWriter, r *http.Request)
		opts   Options
		want   string
	}{{
		name:   "timeout",
		answer: func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() },
		opts:   Options{ToolTimeout: 300 * time.Millisecond},
		want:   "tool call ref__lookup timed out after 300ms without an answer.",
	}, {
		name: "an answer that trickles in",
		answer: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			rc := http.NewResponseController(w)
			for r.Context().Err() == nil {
				if _, err := io.WriteString(w, " "); err != nil || rc.Flush() != nil {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		},
		opts: Options{ToolTimeout: 300 * time.Millisecond},
		want: "tool call ref__lookup timed out after 300ms without an answer.",
	}, {
		name: "5xx",
		answer: func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "upstream exploded at 0xdeadbeef", http.StatusServiceUnavailable)
		},
		want: "tool call ref__lookup failed: HTTP 503",
	}, {
		name: "a body that never ends",
		answer: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"call":{"data":{"content":"`)
			chunk := strings.Repeat("x", 64<<10)
			for {
				if _, err := io.WriteString(w, chunk); err != nil {
					return
				}
			}
		},
		want: "tool call ref__lookup failed: the answer is larger than 4 MiB",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			nothingLeft(t, root)
			platform, calls := serveTracked(t, http.HandlerFunc(tt.answer))
			res, llm := callbackRun(t, tt.opts, root, platform.URL)
			if !res.OK || res.Output != "Last result: "+tt.want {
				t.Errorf("result: ok %v output %q error %q; want the run to go on with %q", res.OK, res.Output, res.Error, tt.want)
			}
			if got := resultOf(t, res, "c1"); !got.IsError {
				t.Errorf("the tool result is not marked as an error: %+v", got)
			}
			calls.settled(t, "the tool endpoint")
			llm.settled(t, "the model server")
		})
	}
	t.Run("redirect", func(t *testing.T) {
		root := t.TempDir()
		nothingLeft(t, root)
		elsewhere, visits := serveTracked(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeContent(w, "STATUS_CODE_OK", "", "the authorization reached another origin: "+r.Header.Get("Authorization"))
		}))
		var redirected atomic.Int32
		platform, calls := serveTracked(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			redirected.Add(1)
			http.Redirect(w, r, elsewhere.URL+"/tools/call", http.StatusTemporaryRedirect)
		}))
		res, llm := callbackRun(t, Options{}, root, platform.URL)
		if want := "Last result: tool call ref__lookup failed: HTTP 307"; !res.OK || res.Output != want {
			t.Errorf("result: ok %v output %q error %q; want %q", res.OK, res.Output, res.Error, want)
		}
		if redirected.Load() != 1 {
			t.Errorf("the endpoint was called %d times, want 1", redirected.Load())
		}
		calls.settled(t, "the tool endpoint")
		visits.settled(t, "the redirect's target")
		llm.settled(t, "the model server")
	})
}

// callbackRun runs one call of the callback tool lookup, answered by the
// platform at url, and returns the result and the model server.
func callbackRun(t *testing.T, opts Options, root, url string) (*runnel.Result, *modelServer) {
	t.Helper()
	llm := newModelServer(t, pauseScript(toolCall("c1", "lookup", `{"city":"Paris"}`)))
	req := llm.request(APIOpenAIChat, "Look it up")
	req.CustomTools = []runnel.ToolSpec{callbackTool("lookup")}
	req.ToolCallback = &runnel.ToolCallback{Endpoint: url + "/tools/call", Authorization: callbackAuth}
	opts.WorkspaceRoot = root
	res, rec := runWithin(t, overHTTP(t, NewManager(&opts)), req)
	if strings.Contains(string(rec.json(t))+res.Output, callbackTok) {
		t.Error("the callback's credential reached the stream")
	}
	return res, llm
}
