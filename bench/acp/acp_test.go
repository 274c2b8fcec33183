package main

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/runnel/runnel/bench/internal/benchkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The relay emulation carries each call through the files to the
// callback server and back, and leaves no file behind. A short poll keeps
// the test quick; the benchmark's is Agenta's 300 ms.
func TestRelayTurn(t *testing.T) {
	cb := httptest.NewServer(benchkit.CallbackHandler(echoTool, echoOutput))
	defer cb.Close()
	dir := t.TempDir()
	var out bytes.Buffer
	in := strings.NewReader(`{"turn":1,"calls":3}` + "\n" + `{"turn":2,"calls":2}` + "\n")
	if err := serveRelay(t.Context(), dir, cb.URL, 5*time.Millisecond, in, &out); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(&out)
	for _, want := range []int{3, 2} {
		var res relayTurnResult
		if err := dec.Decode(&res); err != nil {
			t.Fatal(err)
		}
		if res.Error != "" || len(res.CallsUS) != want {
			t.Errorf("turn answered %+v, want %d calls", res, want)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("the relay left %d files in its directory", len(left))
	}
}

// A tool failure on the platform's side reaches the caller as an error.
func TestRelayCallbackError(t *testing.T) {
	cb := httptest.NewServer(benchkit.CallbackHandler("another-tool", echoOutput))
	defer cb.Close()
	res := relayTurn(t.Context(), t.TempDir(), cb.URL, cb.Client(), 5*time.Millisecond, relayTurnCmd{Turn: 1, Calls: 1})
	if !strings.Contains(res.Error, "HTTP 400") {
		t.Errorf("error %q, want the callback's HTTP 400", res.Error)
	}
}

// The fake agent's log is read one turn at a time, and a call that did
// not answer "ok" fails the turn.
func TestFakeLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.log")
	note := func(text string, us int) string {
		return `{"t":"note","note":"mcp tools/call result","data":{"server":"runnel","tool":"echo","text":"` + text + `","elapsedUs":` + strconv.Itoa(us) + `}}` + "\n"
	}
	write := func(s string) {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	l := &fakeLog{path: path}
	write(`{"t":"recv","method":"session/prompt"}` + "\n" + note("ok", 700) + `{"t":"note","note":"mcp tools/call","data":{}}` + "\n" + note("ok", 900))
	got, err := l.calls()
	if err != nil {
		t.Fatal(err)
	}
	if want := []time.Duration{700 * time.Microsecond, 900 * time.Microsecond}; !slices.Equal(got, want) {
		t.Errorf("first turn %v, want %v", got, want)
	}
	write(note("ok", 500))
	if got, err := l.calls(); err != nil || !slices.Equal(got, []time.Duration{500 * time.Microsecond}) {
		t.Errorf("second turn %v, %v", got, err)
	}
	write(note("error: boom", 500))
	if _, err := l.calls(); err == nil {
		t.Error("a failed call was read as a success")
	}
}

// The fake agent's scenario makes the calls, then the text; any other
// prompt gets the text alone.
func TestCallsScenario(t *testing.T) {
	raw, err := json.Marshal(callsScenario(2))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"turns":[{"steps":[` +
		`{"mcpCall":{"arguments":{"n":0},"server":"runnel","tool":"echo"}},` +
		`{"mcpCall":{"arguments":{"n":1},"server":"runnel","tool":"echo"}},` +
		`{"text":"done"}],"whenPromptContains":"Make the calls."},` +
		`{"steps":[{"text":"done"}]}]}`
	if string(raw) != want {
		t.Errorf("scenario\n%s\nwant\n%s", raw, want)
	}
}
