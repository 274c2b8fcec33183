package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/llmtest"
)

// TestRunsCannotReadRunnelsSecrets: a run's bash reads the environment and
// command line of its parent, where the server's token and interaction
// secret live. On the local sandbox (which the operator must allow where
// the host has the isolated one) the parent is runnel: as runnel's own
// unprivileged user it is refused (runnel is not dumpable); as root it
// can read them (root keeps CAP_SYS_PTRACE, which /v1/capabilities says),
// but the server's secrets are secrets of every run, so nothing it shows
// carries them. On the isolated sandbox, the default, runnel is not in
// the sandbox's pid namespace at all: the parent is the sandbox's init.
func TestRunsCannotReadRunnelsSecrets(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("PR_SET_DUMPABLE and /proc are Linux")
	}
	const (
		token  = "replica-token-0123456789"
		secret = "interaction-secret-9f8e7d6c5b4a"
	)
	bin := buildShared(t)
	llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{
		{When: llmtest.Match{LastRole: "tool"}, Reply: llmtest.Reply{Text: "Saw: {{last_tool_result}}"}},
		{Reply: llmtest.Reply{ToolCalls: []llmtest.ToolCall{{ID: "call_env", Name: "bash",
			Arguments: json.RawMessage(`{"command":"tr '\\0' ' ' < /proc/$PPID/environ; echo; tr '\\0' ' ' < /proc/$PPID/cmdline; head -c 64 /proc/$PPID/mem"}`)}}}},
	}})
	defer llm.Close()
	type user struct {
		name    string
		cred    *syscall.Credential
		sandbox string
		want    string // what bash must have seen instead of the secrets
	}
	users := []user{{"runnel's own user", nil, "local", "Permission denied"}}
	if os.Geteuid() == 0 {
		users[0].want = "[REDACTED]" // root reads /proc of anyone
		users = append(users, user{"an unprivileged user", &syscall.Credential{Uid: 65534, Gid: 65534}, "local", "Permission denied"})
	}
	if _, err := exec.LookPath("bwrap"); err == nil || os.Getenv("RUNNEL_TEST_REQUIRE_ISOLATION") != "" {
		users = append(users, user{"runnel's own user, isolated", nil, "", "cannot open /proc/1/environ: Permission denied"})
	}
	for _, u := range users {
		t.Run(u.name, func(t *testing.T) {
			root := ownedDir(t, u.cred)
			env := []string{"PATH=/usr/bin:/bin", "RUNNEL_PORT=0", "RUNNEL_TOKEN=" + token,
				"RUNNEL_INTERACTION_SECRET=" + secret, "RUNNEL_WORKSPACE_ROOT=" + root, "RUNNEL_ALLOW_LOCAL_SANDBOX=true"}
			url, _, stop := startProcessAs(t, bin, env, u.cred)
			res := postRun(t, url, map[string]any{
				"sandbox":     u.sandbox,
				"model":       "openai/gpt-test",
				"endpoint":    map[string]string{"baseUrl": llm.URL + "/v1"},
				"tools":       []string{"bash"},
				"permissions": map[string]string{"default": "allow"},
				"messages":    []runnel.Message{runnel.UserText("Look around.")},
			})
			stop()
			all, _ := json.Marshal(res)
			for _, s := range []string{token, secret} {
				if strings.Contains(string(all), s) {
					t.Fatalf("the run's result carries a secret of the server: %s", all)
				}
			}
			if !strings.Contains(res.Output, u.want) {
				t.Errorf("bash saw %q, want %q in it", res.Output, u.want)
			}
		})
	}
}

// buildShared builds the runnel binary where any user may run it.
func buildShared(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "runnel-bin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "runnel")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// ownedDir is a fresh private directory owned by cred's user (nil: this
// one), for a runnel running as that user to keep its workspaces in.
func ownedDir(t *testing.T, cred *syscall.Credential) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "runnel-ws-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
