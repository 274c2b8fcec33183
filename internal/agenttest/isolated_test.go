package agenttest

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/llmtest"
)

// Every agent inside the isolated sandbox, with a network allowlist that
// admits only the scripted model's address and a filesystem that shows
// only the workspace, the toolchain, the agent's installation and its
// HOME: an approval pauses on one runnel and resumes on another, the
// approved call reaching runnel's tool through the unix socket. The
// model sees every request arrive from runnel's proxy, never from the
// agent, and runnel listens on no TCP port for the agent meanwhile.
func TestAgentsIsolated(t *testing.T) {
	requireBwrap(t)
	for _, ac := range agentCases() {
		t.Run(ac.harness, func(t *testing.T) {
			dir := agentsDir(t, ac.harness)
			llm := llmtest.NewServer(script())
			defer llm.Close()
			first, second := serve(t, dir), serve(t, dir)
			defer first.checkClean(t, dir)
			defer second.checkClean(t, dir)
			model := newWitness(llm, first, second)
			defer model.srv.Close()

			req, cb := weatherRequest(t, ac, model.server(), false)
			req["sandbox"] = "isolated"
			// best_effort: get_weather is a callback, which runnel runs
			// outside the sandbox.
			req["sandboxPermission"] = map[string]any{"filesystem": "off", "enforcement": "best_effort",
				"network": map[string]any{"mode": "allowlist", "allowlist": []string{"127.0.0.1"}}}
			_, events := approveOnAnother(t, first, second, req, cb)
			checkToolEvents(t, events, "get_weather", `{"city":"Paris"}`)
			model.check(t)

			// An allowlist without the model's address refuses the run
			// before any agent starts, naming what to add.
			req["sandboxPermission"] = map[string]any{"enforcement": "best_effort",
				"network": map[string]any{"mode": "allowlist", "allowlist": []string{"127.0.0.2"}}}
			refused, _ := first.run(t, req)
			if refused.ErrorCode != runnel.CodeInvalidRequest || !strings.Contains(refused.Error, "must reach its model at 127.0.0.1, which sandboxPermission.network.allowlist does not admit; add 127.0.0.1 to it") {
				t.Errorf("model off the allowlist: %+v", refused)
			}
		})
	}
}

// requireBwrap skips a test that needs the isolated sandbox where
// canIsolate says there is none.
func requireBwrap(t *testing.T) {
	t.Helper()
	if !canIsolate() {
		t.Skip("bubblewrap is not installed: the isolated sandbox cannot run here")
	}
}

// canIsolate reports whether the runnel under test has the isolated
// sandbox, and so runs every agent there by default: where bubblewrap is
// installed, or where RUNNEL_TEST_REQUIRE_ISOLATION says it must be
// (.ci/run sets it, so a host that cannot isolate fails there).
func canIsolate() bool {
	_, err := exec.LookPath("bwrap")
	return err == nil || os.Getenv("RUNNEL_TEST_REQUIRE_ISOLATION") != ""
}

// witness is the scripted model behind a handler that notes, for every
// request, which process holds the client's end of the connection and
// which TCP ports the runnel processes listen on.
type witness struct {
	srv     *httptest.Server
	runnels []*runnelProc

	mu      sync.Mutex
	owners  map[string]int // owner pid of each client socket, by remote address, read when it connected
	clients []int          // owner pid of each request's client socket
	reqs    []string       // each request's method, path and client address, for messages
	ports   []string       // "pid:port" listened on beside the API, at request time
}

func newWitness(llm *llmtest.Server, runnels ...*runnelProc) *witness {
	w := &witness{runnels: runnels, owners: map[string]int{}}
	w.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		owner := w.owners[r.RemoteAddr]
		w.mu.Unlock()
		var extra []string
		for _, listening := range listeningPorts() {
			pid := portOwner(listening)
			for _, rp := range w.runnels {
				if pid == rp.cmd.Process.Pid && listening != rp.port() {
					extra = append(extra, strconv.Itoa(pid)+":"+strconv.Itoa(listening))
				}
			}
		}
		w.mu.Lock()
		w.clients = append(w.clients, owner)
		w.reqs = append(w.reqs, r.Method+" "+r.URL.Path+" from "+r.RemoteAddr)
		w.ports = append(w.ports, extra...)
		w.mu.Unlock()
		llm.Handler().ServeHTTP(rw, r)
	}))
	// The owner is looked up as the connection is accepted: by the time
	// a request is handled, a client that sent it and gave up may have
	// closed its socket, and nobody would own it any more.
	w.srv.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st != http.StateNew {
			return
		}
		_, p, _ := net.SplitHostPort(c.RemoteAddr().String())
		port, _ := strconv.Atoi(p)
		owner := socketOwner(port, "01")
		w.mu.Lock()
		w.owners[c.RemoteAddr().String()] = owner
		w.mu.Unlock()
	}
	w.srv.Start()
	return w
}

// server is the model as a request names it.
func (w *witness) server() *llmtest.Server { return &llmtest.Server{URL: w.srv.URL} }

func (w *witness) check(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.clients) == 0 {
		t.Fatal("the model received no request")
	}
	var pids []int
	for _, rp := range w.runnels {
		pids = append(pids, rp.cmd.Process.Pid)
	}
	for i, owner := range w.clients {
		if !slices.Contains(pids, owner) {
			t.Errorf("model request %d (%s) came from pid %d, not from runnel's proxy (runnels %v)", i, w.reqs[i], owner, pids)
		}
	}
	if len(w.ports) > 0 {
		t.Errorf("runnel listened on TCP ports besides its API while the agent ran: %v", w.ports)
	}
}
