package uitest

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// updateScreenshot rewrites docs/playground.png, the README's picture of
// the playground, from the run; without it the test leaves the tree alone.
var updateScreenshot = flag.Bool("update-screenshot", false, "write docs/playground.png from the browser test")

// chromiumPath is Debian's Chromium, which the browser test drives.
const chromiumPath = "/usr/bin/chromium"

// browserReport is what node/browser.mjs saw the page show.
type browserReport struct {
	OK            bool
	Error         string
	Blocked       []string // requests that would have left loopback
	ConsoleErrors []string // console errors and uncaught exceptions, CSP violations included
	Requests      int
	Screenshots   []string
	Profile       string
	Suggestions   []string
	Streamed      struct {
		Lengths     []int // the answer's length at each change seen while streaming
		FinalLength int
		Status      string
		Text        string
		TextState   string
		Reasoning   int
		User        string
	}
	Approved, Denied, Connected, ConnectClosed, ConnectCancelled toolStep
	Colors                                                       struct{ Light, Dark string }
	Stopped                                                      struct {
		Status               string
		StreamingParts       int
		SendShown, StopShown bool
	}
	NewChat struct {
		Empty    bool
		Messages int
		Status   string
	}
	Failed struct {
		Status     string
		Error      string
		ErrorShown bool
	}
	Token struct {
		Hint                                       string
		PickerBefore, PanelAfter, PanelAfterReload bool
		Status, Reply                              string
		Authorization                              []string // each /v1/ call's header, in order
	}
}

// toolStep is one tool call: the card while it waited, after the answer,
// the model's reply and the request that resumed the run.
type toolStep struct {
	PausedStatus string
	WaitingBadge string
	WidgetTitle  string
	Forged       struct {
		SameOriginOtherWindow string // card state after a message from the page itself
		PopupOtherOrigin      string // card state after a message from the popup on another origin
		WidgetShown           int
	}
	Status    string
	State     string
	Badge     string
	Output    any
	Reply     string
	MessageID string
	Resume    struct {
		Requests      int
		Trigger       string
		Compat        string
		MessageID     string
		LastMessageID string
		Part          map[string]any
	}
}

// TestBrowserPlayground drives the playground in Chromium against `runnel
// demo`: streamed text, an approval approved and one denied, the connect
// popup allowed and closed, a Cancel, forged postMessages ignored, a failed
// run, Stop, New chat and dark mode. Screenshots of each stage go to the
// artifacts directory.
func TestBrowserPlayground(t *testing.T) {
	var extra []string
	if *updateScreenshot {
		docs, err := filepath.Abs(filepath.Join("..", "..", "docs", "playground.png"))
		if err != nil {
			t.Fatal(err)
		}
		extra = append(extra, "RUNNEL_UI_DOCS_SHOT="+docs)
	}
	r := runBrowser(t, "chat", extra...)
	if r.Profile == "" {
		t.Error("the model picker selected no profile")
	}
	if diff := cmp.Diff([]string{"Say hello", "Delete a file", "Connect my drive"}, r.Suggestions); diff != "" {
		t.Errorf("suggestions (-want +got):\n%s", diff)
	}

	t.Run("streamed text", func(t *testing.T) {
		s := r.Streamed
		growing := len(s.Lengths) >= 2
		for i := 1; i < len(s.Lengths); i++ {
			growing = growing && s.Lengths[i] > s.Lengths[i-1]
		}
		if !growing {
			t.Fatalf("the answer was not seen growing while it streamed: lengths %v", s.Lengths)
		}
		if s.FinalLength < s.Lengths[len(s.Lengths)-1] {
			t.Errorf("the final answer (%d) is shorter than what was seen streaming (%v)", s.FinalLength, s.Lengths)
		}
		if s.Status != "done" || s.TextState != "done" {
			t.Errorf("status %q, text state %q; want done, done", s.Status, s.TextState)
		}
		if s.Reasoning == 0 {
			t.Error("the model's reasoning is not shown")
		}
		if s.User != "Hello! What can you do?" {
			t.Errorf("user bubble %q", s.User)
		}
	})

	t.Run("approve", func(t *testing.T) {
		s := r.Approved
		checkWaited(t, s, "waiting for approval")
		checkSettled(t, s, "output-available", "done")
		// The demo model repeats the tool's result: it read what ran.
		if out, _ := s.Output.(string); out == "" || !strings.Contains(s.Reply, out) {
			t.Errorf("the model's reply %q does not carry the tool's output %q", s.Reply, s.Output)
		}
		checkResume(t, s)
		approval, _ := s.Resume.Part["approval"].(map[string]any)
		if s.Resume.Part["state"] != "approval-responded" || approval["approved"] != true || approval["id"] == nil {
			t.Errorf("resume posted part %v; want state approval-responded, approval {id, approved: true}", s.Resume.Part)
		}
	})

	t.Run("deny", func(t *testing.T) {
		s := r.Denied
		checkWaited(t, s, "waiting for approval")
		checkSettled(t, s, "output-denied", "denied")
		checkResume(t, s)
		approval, _ := s.Resume.Part["approval"].(map[string]any)
		if approval["approved"] != false || approval["reason"] != "I still need that plan" {
			t.Errorf("resume posted approval %v; want approved false with the reason", approval)
		}
	})

	t.Run("connect allowed", func(t *testing.T) {
		s := r.Connected
		checkWaited(t, s, "waiting for you")
		if s.WidgetTitle != "Connect Demo Drive" {
			t.Errorf("widget title %q", s.WidgetTitle)
		}
		if s.Forged.SameOriginOtherWindow != "input-available" || s.Forged.PopupOtherOrigin != "input-available" || s.Forged.WidgetShown != 1 {
			t.Errorf("a forged postMessage settled the widget: %+v", s.Forged)
		}
		checkSettled(t, s, "output-available", "done")
		checkOutput(t, s, map[string]any{"connected": true, "account": "demo@example.com"})
		checkResume(t, s)
		if !strings.Contains(s.Reply, "Connected") {
			t.Errorf("the model's reply %q does not say it connected", s.Reply)
		}
	})

	t.Run("connect popup closed", func(t *testing.T) {
		s := r.ConnectClosed
		checkWaited(t, s, "waiting for you")
		checkSettled(t, s, "output-available", "done")
		checkOutput(t, s, map[string]any{"connected": false, "reason": "closed"})
		checkResume(t, s)
		if !strings.Contains(s.Reply, "closed") {
			t.Errorf("the model's reply %q does not say why it was not connected", s.Reply)
		}
	})

	t.Run("connect cancelled", func(t *testing.T) {
		s := r.ConnectCancelled
		checkSettled(t, s, "output-available", "done")
		checkOutput(t, s, map[string]any{"connected": false, "reason": "cancelled"})
		checkResume(t, s)
		if !strings.Contains(s.Reply, "cancelled") {
			t.Errorf("the model's reply %q does not say why it was not connected", s.Reply)
		}
	})

	if s := r.Failed; s.Status != "error" || !s.ErrorShown || strings.TrimSpace(s.Error) == "" {
		t.Errorf("a failed run: %+v; want status error and its sentence in the chat", s)
	}
	if s := r.Stopped; s.Status != "stopped" || s.StreamingParts != 0 || !s.SendShown || s.StopShown {
		t.Errorf("after Stop: %+v; want status stopped, nothing streaming, Send back", s)
	}
	if diff := cmp.Diff(struct {
		Empty    bool
		Messages int
		Status   string
	}{true, 0, "idle"}, r.NewChat); diff != "" {
		t.Errorf("after New chat (-want +got):\n%s", diff)
	}
	if r.Colors.Light == "" || r.Colors.Light == r.Colors.Dark {
		t.Errorf("prefers-color-scheme: dark did not change the page (light %q, dark %q)", r.Colors.Light, r.Colors.Dark)
	}
}

// runBrowser starts `runnel demo`, runs node/browser.mjs's scenario against
// it in a fresh Chromium profile and returns what the script reported; a
// script that fails fails the test with its output.
func runBrowser(t *testing.T, scenario string, env ...string) *browserReport {
	t.Helper()
	node, modules := nodeTools(t)
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv(envRequire) != "" {
			t.Fatalf("%s is set but there is no Chromium: %v", envRequire, err)
		}
		t.Skipf("no Chromium (%v); apt-get install chromium", err)
	}
	demo := startDemo(t)
	shots := artifactsDir(t)
	env = append(env,
		"RUNNEL_UI_SCENARIO="+scenario,
		"RUNNEL_UI_URL="+demo.URL,
		"RUNNEL_UI_NODE_MODULES="+modules,
		"RUNNEL_UI_CHROMIUM="+chromiumPath,
		"RUNNEL_UI_PROFILE="+t.TempDir(), // a fresh profile, removed with the test
		"RUNNEL_UI_SHOTS="+shots,
	)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("node", "browser.mjs"))
	cmd.Env = append(os.Environ(), env...)
	// SIGTERM, not SIGKILL: playwright closes Chromium on SIGTERM, and
	// Chromium runs in a process group of its own that a kill of node
	// would leave behind.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var r browserReport
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil || runErr != nil || !r.OK {
		t.Fatalf("browser.mjs: %v (report: %v)\nerror: %s\nstdout:\n%s\nstderr:\n%s\nscreenshots in %s", runErr, err, r.Error, stdout.String(), stderr.String(), shots)
	}
	t.Logf("screenshots in %s", shots)
	if len(r.Blocked) > 0 {
		t.Errorf("the browser tried to leave loopback: %v", r.Blocked)
	}
	if len(r.ConsoleErrors) > 0 {
		t.Errorf("console errors (a CSP violation shows here):\n%s", strings.Join(r.ConsoleErrors, "\n"))
	}
	return &r
}

// TestBrowserPlaygroundToken: on a runnel that requires a token, the page
// asks for one when the API answers 401, then sends it on every call, and
// keeps it across a reload of the tab.
func TestBrowserPlaygroundToken(t *testing.T) {
	const token = "playground-test-token"
	t.Setenv("RUNNEL_TOKEN", token) // startDemo passes the environment on
	r := runBrowser(t, "token", "RUNNEL_UI_TOKEN="+token)
	k := r.Token
	if k.Hint == "" || k.PickerBefore || k.PanelAfter || k.PanelAfterReload {
		t.Errorf("token panel: hint %q, picker shown before the token %v, panel after it %v, after a reload %v; want a sentence, false, false, false",
			k.Hint, k.PickerBefore, k.PanelAfter, k.PanelAfterReload)
	}
	if k.Status != "done" || k.Reply == "" {
		t.Errorf("with the token: status %q, reply %q", k.Status, k.Reply)
	}
	if len(k.Authorization) < 3 || k.Authorization[0] != "" {
		t.Fatalf("API calls sent Authorization %q; want none on the first, then the token", k.Authorization)
	}
	for i, a := range k.Authorization[1:] {
		if a != "Bearer "+token {
			t.Errorf("API call %d sent Authorization %q, want the token", i+1, a)
		}
	}
}

// TestBrowserStreamModule runs the page's stream module (the SSE reader and
// the chunk reducer) in Node against edge cases the demo never produces:
// bodies cut inside a line, a CRLF or a UTF-8 sequence, comments, [DONE],
// and the exact UIMessages a paused and resumed turn leaves to post back.
func TestBrowserStreamModule(t *testing.T) {
	node, _ := nodeTools(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, node, filepath.Join("node", "stream.mjs")).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("node stream.mjs: %v\n%s", err, out)
	}
}

func checkWaited(t *testing.T, s toolStep, badge string) {
	t.Helper()
	if s.PausedStatus != "paused" || s.WaitingBadge != badge {
		t.Errorf("while waiting: status %q, badge %q; want paused, %q", s.PausedStatus, s.WaitingBadge, badge)
	}
}

func checkSettled(t *testing.T, s toolStep, state, badge string) {
	t.Helper()
	if s.State != state || s.Badge != badge || s.Status != "done" {
		t.Errorf("after the answer: card %q (badge %q), status %q; want %q (%q), done", s.State, s.Badge, s.Status, state, badge)
	}
	if strings.TrimSpace(s.Reply) == "" {
		t.Error("the model's follow-up text is missing under the card")
	}
}

func checkOutput(t *testing.T, s toolStep, want map[string]any) {
	t.Helper()
	if diff := cmp.Diff(want, s.Output); diff != "" {
		t.Errorf("card output (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, s.Resume.Part["output"]); diff != "" {
		t.Errorf("output posted to resume (-want +got):\n%s", diff)
	}
}

// checkResume: the answer went back in one more request, which continued
// the same assistant message.
func checkResume(t *testing.T, s toolStep) {
	t.Helper()
	r := s.Resume
	if r.Requests != 2 || r.Trigger != "submit-message" || r.Compat != "ai7" {
		t.Errorf("resume: %d requests for the turn, trigger %q, compat %q; want 2, submit-message, ai7", r.Requests, r.Trigger, r.Compat)
	}
	if r.MessageID == "" || r.MessageID != s.MessageID || r.LastMessageID != s.MessageID {
		t.Errorf("resume named message %q (last posted %q); the card is in %q", r.MessageID, r.LastMessageID, s.MessageID)
	}
	if r.Part == nil {
		t.Error("the resume request does not hold the tool part")
	}
}
