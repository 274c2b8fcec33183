package run

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/runnel/runnel/internal/proctest"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/llmtest"
	"github.com/runnel/runnel/internal/redact"
	"github.com/runnel/runnel/internal/sandbox"
)

// isolator probes the isolated sandbox with this test binary as its
// init; see sandbox.requireIsolation for the skip rule.
func isolator(t *testing.T) *sandbox.Isolator {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	i, err := sandbox.ProbeIsolator(context.Background(), &sandbox.IsolatorOptions{Helper: exe})
	if err != nil {
		t.Fatal(err)
	}
	if !i.Supported() {
		if os.Getenv("RUNNEL_TEST_REQUIRE_ISOLATION") != "" {
			t.Fatalf("isolated sandbox unavailable: %s", i.Detail())
		}
		t.Skipf("isolated sandbox unavailable: %s", i.Detail())
	}
	t.Cleanup(func() {
		if err := i.Close(); err != nil {
			t.Error(err)
		}
	})
	return i
}

// TestIsolatedRunBash runs bash through a whole run under each network
// policy: with the network off the namespace has no route; with an
// allowlist a connection off it fails inside and comes back as a notice
// naming what was refused.
func TestIsolatedRunBash(t *testing.T) {
	iso := isolator(t)
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	forbidden := ln.Addr().String()
	probe := `awk 'NR>1' /proc/net/route | wc -l; test -w / && echo root-writable; ` +
		`bash -c 'exec 3<>/dev/tcp/127.0.0.1/3128 && printf "CONNECT ` + forbidden + ` HTTP/1.1\r\n\r\n" >&3 && head -1 <&3'`
	for _, c := range []struct {
		name   string
		policy *runnel.SandboxPermission
		notice bool
	}{
		{"off", &runnel.SandboxPermission{Network: &runnel.NetworkPolicy{Mode: "off"}}, false},
		{"allowlist", &runnel.SandboxPermission{Network: &runnel.NetworkPolicy{Mode: "allowlist", Allowlist: []string{"api.example.com"}}}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			call, _ := json.Marshal(map[string]string{"command": probe})
			llm := llmtest.NewServer(pauseScript(toolCall("c_sh", "bash", string(call))))
			defer llm.Close()
			req := baseRequest(llm, APIOpenAIChat, "Probe the network")
			req.Tools = []string{"bash"}
			req.Permissions = json.RawMessage(`{"default":"allow"}`)
			req.Sandbox = "isolated"
			req.SandboxPermission = c.policy
			var events []runnel.Event
			res, err := overHTTP(t, NewManager(&Options{WorkspaceRoot: t.TempDir(), Isolator: iso})).Run(context.Background(), req,
				runnel.SinkFunc(func(e runnel.Event) { events = append(events, e) }))
			if err != nil || res.Status != runnel.StatusCompleted {
				t.Fatalf("run: %v %+v", err, res)
			}
			out := res.Messages[1].Content[0].OutputText()
			if !strings.HasPrefix(out, "0\n") || strings.Contains(out, "root-writable") || strings.Contains(out, " 200 ") {
				t.Errorf("bash said %q: want no route, a read-only root, no tunnel", out)
			}
			var notices []string
			for _, e := range events {
				if e.Type == runnel.EventNotice && strings.Contains(e.Text, "refused a connection to "+forbidden) {
					notices = append(notices, e.Text)
				}
			}
			if c.notice != (len(notices) == 1) {
				t.Errorf("denial notices %q, want one: %v", notices, c.notice)
			}
		})
	}
}

// TestIsolatedRefusals: what the isolated sandbox cannot enforce, or a
// run that would reach around it, is refused with a sentence.
func TestIsolatedRefusals(t *testing.T) {
	iso := isolator(t)
	llm := llmtest.NewServer(pauseScript())
	defer llm.Close()
	for _, c := range []struct {
		name string
		edit func(*runnel.RunRequest)
		want string
	}{
		{"bad allowlist entry", func(r *runnel.RunRequest) {
			r.SandboxPermission = &runnel.SandboxPermission{Network: &runnel.NetworkPolicy{Mode: "allowlist", Allowlist: []string{"http://x"}}}
		}, `sandboxPermission.network: allowlist entry "http://x" is not a host name, *.domain, IP address or CIDR range (like 10.0.0.0/8).`},
		{"allowlist without mode", func(r *runnel.RunRequest) {
			r.SandboxPermission = &runnel.SandboxPermission{Network: &runnel.NetworkPolicy{Mode: "off", Allowlist: []string{"x.test"}}}
		}, `sandboxPermission.network.allowlist is only used with mode "allowlist"; set mode "allowlist", or remove the allowlist.`},
		{"unknown filesystem", func(r *runnel.RunRequest) {
			r.SandboxPermission = &runnel.SandboxPermission{Filesystem: "partial"}
		}, `Unknown sandboxPermission.filesystem "partial"; use "on", "readonly" or "off".`},
		{"callback tool under network off", func(r *runnel.RunRequest) {
			r.SandboxPermission = &runnel.SandboxPermission{Network: &runnel.NetworkPolicy{Mode: "off"}}
			r.CustomTools = []runnel.ToolSpec{{Name: "lookup", Kind: runnel.ToolKindCallback}}
			r.ToolCallback = &runnel.ToolCallback{Endpoint: "https://platform.example/tools/call"}
		}, `The sandbox's network is "off", but the callback tool "lookup" would run in runnel itself, outside the sandbox, where that policy does not reach; remove them, or set sandboxPermission.enforcement to "best_effort" to accept that they run outside it.`},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := baseRequest(llm, APIOpenAIChat, "hi")
			req.Sandbox = "isolated"
			c.edit(req)
			_, err := NewManager(&Options{Isolator: iso}).Run(context.Background(), req, nil)
			if err == nil || err.Error() != c.want {
				t.Errorf("got %v\nwant %s", err, c.want)
			}
		})
	}
	// best_effort accepts the callback tool.
	req := baseRequest(llm, APIOpenAIChat, "hi")
	req.Sandbox = "isolated"
	req.SandboxPermission = &runnel.SandboxPermission{Network: &runnel.NetworkPolicy{Mode: "off"}, Enforcement: "best_effort"}
	req.CustomTools = []runnel.ToolSpec{{Name: "lookup", Kind: runnel.ToolKindCallback}}
	req.ToolCallback = &runnel.ToolCallback{Endpoint: "https://platform.example/tools/call"}
	if _, err := NewManager(&Options{Isolator: iso}).Run(context.Background(), req, nil); err != nil {
		t.Errorf("best_effort: %v", err)
	}
}

// TestIsolatedAgentRefusals: an agent runs inside the sandbox and calls
// its model and the user's MCP servers from there, so a network that
// would not let it reach them refuses the run before any agent starts;
// the allowlist is never widened for them.
func TestIsolatedAgentRefusals(t *testing.T) {
	iso := isolator(t)
	b := newACPTestbed(t, `{}`)
	cb := newPlatform(t, nil)
	for _, c := range []struct {
		name string
		edit func(*runnel.RunRequest)
		want string
	}{
		{"network off", func(r *runnel.RunRequest) {
			r.SandboxPermission = &runnel.SandboxPermission{Network: &runnel.NetworkPolicy{Mode: "off"}, Enforcement: "best_effort"}
		}, `The sandbox's network is "off", but harness "claude" runs inside it and must reach its model at 127.0.0.1; set sandboxPermission.network.mode to "allowlist" with 127.0.0.1 on the allowlist.`},
		{"model off the allowlist", func(r *runnel.RunRequest) {
			r.SandboxPermission = &runnel.SandboxPermission{Network: &runnel.NetworkPolicy{Mode: "allowlist", Allowlist: []string{"10.0.0.0/8", "*.example.com"}}, Enforcement: "best_effort"}
		}, `Harness "claude" runs inside the sandbox and must reach its model at 127.0.0.1, which sandboxPermission.network.allowlist does not admit; add 127.0.0.1 to it.`},
		{"MCP server off the allowlist", func(r *runnel.RunRequest) {
			r.SandboxPermission = &runnel.SandboxPermission{Network: &runnel.NetworkPolicy{Mode: "allowlist", Allowlist: []string{"127.0.0.1", "*.example.com"}}, Enforcement: "best_effort"}
			r.McpServers = []runnel.McpServer{{Name: "docs", URL: "https://example.com/mcp"}}
		}, `Harness "claude" runs inside the sandbox and must reach MCP server "docs" at example.com, which sandboxPermission.network.allowlist does not admit; add example.com to it.`},
		{"callback tool, strict", func(r *runnel.RunRequest) {
			r.SandboxPermission = &runnel.SandboxPermission{Network: &runnel.NetworkPolicy{Mode: "allowlist", Allowlist: []string{"127.0.0.1"}}}
		}, `The sandbox's network is "allowlist", but the callback tool "delete_file" would run in runnel itself, outside the sandbox, where that policy does not reach; remove them, or set sandboxPermission.enforcement to "best_effort" to accept that they run outside it.`},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := claudeRequest(cb, "hi")
			req.Sandbox = "isolated"
			c.edit(req)
			_, err := NewManager(&Options{Agents: b.agents, Isolator: iso}).Run(context.Background(), req, nil)
			if err == nil || err.Error() != c.want {
				t.Errorf("got %v\nwant %s", err, c.want)
			}
		})
	}
	if raw, _ := os.ReadFile(b.log); len(raw) > 0 {
		t.Errorf("an agent started for a refused run:\n%s", raw)
	}
}

// TestIsolatedStdioServer runs the reference MCP server over stdio inside
// the isolated sandbox with the network off: its tools work through the
// loop, its environment is the scrubbed one plus what the request gave it
// (the credential hidden from everything the run shows), and its process
// is gone when the run ends.
func TestIsolatedStdioServer(t *testing.T) {
	iso := isolator(t)
	entry := os.Getenv("RUNNEL_TEST_SERVER_EVERYTHING")
	if entry == "" {
		t.Skip("RUNNEL_TEST_SERVER_EVERYTHING is not set: it names the dist/index.js of @modelcontextprotocol/server-everything, which .ci/run installs")
	}
	if strings.HasPrefix(entry, "/tmp/") {
		t.Fatalf("RUNNEL_TEST_SERVER_EVERYTHING is %s, under /tmp, which the isolated sandbox replaces with its own: install it elsewhere (.ci/run uses /var/tmp)", entry)
	}
	const token = "stdio-credential-0123456789"
	llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{
		{When: llmtest.Match{LastRole: "tool"}, Reply: llmtest.Reply{Text: "done"}},
		{When: llmtest.Match{HasTool: "mcp__everything__echo"}, Reply: llmtest.Reply{ToolCalls: []llmtest.ToolCall{
			{ID: "e1", Name: "mcp__everything__echo", Arguments: json.RawMessage(`{"message":"hello"}`)},
			{ID: "e2", Name: "mcp__everything__get-sum", Arguments: json.RawMessage(`{"a":2,"b":3}`)},
			{ID: "e3", Name: "mcp__everything__get-env", Arguments: json.RawMessage(`{}`)},
		}}},
	}})
	defer llm.Close()
	req := baseRequest(llm, APIOpenAIChat, "use the tools")
	req.Sandbox = "isolated"
	req.SandboxPermission = &runnel.SandboxPermission{Network: &runnel.NetworkPolicy{Mode: "off"}}
	req.McpServers = []runnel.McpServer{{Name: "everything", Connection: &runnel.McpConnection{
		Type: "stdio", Command: "node", Args: []string{entry, "stdio"}, Env: map[string]string{"EVERYTHING_LABEL": "from-the-request"},
		Credentials: []runnel.Credential{{Binding: runnel.CredentialBinding{Kind: runnel.BindingEnvironment, Name: "EVERYTHING_TOKEN"}, Value: token}},
	}}}
	req.Permissions = json.RawMessage(`{"default":"allow"}`)
	res, err := NewManager(&Options{Isolator: iso, WorkspaceRoot: t.TempDir()}).Run(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != runnel.StatusCompleted || len(res.Notices) != 0 {
		t.Fatalf("status %q notices %q", res.Status, res.Notices)
	}
	outputs := toolOutputs(res)
	if len(outputs) != 3 || !strings.HasPrefix(outputs[0], "Echo: hello") || !strings.HasPrefix(outputs[1], "The sum of 2 and 3 is 5.") {
		t.Fatalf("tool results %q", outputs)
	}
	var env map[string]string
	if err := json.Unmarshal([]byte(outputs[2]), &env); err != nil {
		t.Fatalf("get-env: %v: %s", err, outputs[2])
	}
	// A stdio server's environment is where its keys go: every value
	// is a secret of the run, present inside and hidden outside.
	if env["EVERYTHING_LABEL"] != "[REDACTED]" || env["EVERYTHING_TOKEN"] != "[REDACTED]" {
		t.Errorf("the server's environment %v: want the request's variables, hidden from the result", env)
	}
	keys := slices.Sorted(maps.Keys(env))
	if want := []string{"EVERYTHING_LABEL", "EVERYTHING_TOKEN", "HOME", "LANG", "PATH", "PWD", "TERM"}; !slices.Equal(keys, want) {
		t.Errorf("the server's environment has %v, want only %v (nothing of runnel's own)", keys, want)
	}
	if raw, _ := json.Marshal(res); strings.Contains(string(raw), token) {
		t.Error("the result shows the stdio server's credential")
	}
	if left := proctest.Naming(entry); len(left) > 0 {
		t.Errorf("the stdio server outlived its run: %v", left)
	}
}

// TestIsolatedStdioHostile: a stdio server that dies at once, or that
// floods one endless line, is left out of the run with a sentence saying
// why; the run goes on, and nothing of either is left running.
func TestIsolatedStdioHostile(t *testing.T) {
	iso := isolator(t)
	llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{{Reply: llmtest.Reply{Text: "hi"}}}})
	defer llm.Close()
	for _, c := range []struct {
		name, script, want string
	}{
		{"dies", `echo "cannot find the config file" >&2; exit 3`,
			`MCP server "bad" is unavailable for this run: its program stopped before answering initialize; it wrote: cannot find the config file.`},
		{"floods", `printf '{"jsonrpc":"2.0","id":1,"result":"'; exec tr '\0' a </dev/zero`,
			`MCP server "bad" is unavailable for this run: a message it sent is larger than 4 MiB, the most runnel reads of one MCP message.`},
		// Inside its own pid namespace the program sees its sandbox's
		// processes only: bwrap, the shell (runnel's init exec'd into it),
		// the shell's subshell, ls and grep; none of the host's.
		{"looks around", `echo "sees $(ls /proc | grep -c '^[0-9]') processes" >&2; exit 1`,
			`MCP server "bad" is unavailable for this run: its program stopped before answering initialize; it wrote: sees 5 processes.`},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := baseRequest(llm, APIOpenAIChat, "hi")
			req.Sandbox = "isolated"
			req.SandboxPermission = &runnel.SandboxPermission{Network: &runnel.NetworkPolicy{Mode: "off"}}
			req.McpServers = []runnel.McpServer{{Name: "bad", Connection: &runnel.McpConnection{
				Type: "stdio", Command: "/bin/sh", Args: []string{"-c", c.script, "stdio-" + c.name}}}}
			res, err := NewManager(&Options{Isolator: iso, WorkspaceRoot: t.TempDir()}).Run(context.Background(), req, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != runnel.StatusCompleted || len(res.Notices) != 1 || res.Notices[0] != c.want {
				t.Fatalf("status %q notices %q, want %q", res.Status, res.Notices, c.want)
			}
			if left := proctest.Naming("stdio-" + c.name); len(left) > 0 {
				t.Errorf("the server outlived its run: %v", left)
			}
		})
	}
}

// TestNoNoticeAfterDone: a refusal the egress proxy reports once the run
// has emitted done (a process still being ended) does not follow done.
func TestNoNoticeAfterDone(t *testing.T) {
	var got []runnel.Event
	rs := &runSink{next: runnel.SinkFunc(func(e runnel.Event) { got = append(got, e) }), traceID: "t1"}
	p := &plan{red: redact.New("s3cret-value"), log: slog.New(slog.DiscardHandler)}
	notice := notices(p, rs)
	notice("refused s3cret-value.example")
	rs.Emit(runnel.Event{Type: runnel.EventDone})
	notice("refused another.example")
	want := []runnel.Event{{Type: runnel.EventNotice, Text: "refused [REDACTED].example"}, {Type: runnel.EventDone, TraceID: "t1"}}
	if !slices.EqualFunc(got, want, func(a, b runnel.Event) bool { return a.Type == b.Type && a.Text == b.Text && a.TraceID == b.TraceID }) {
		t.Errorf("events %+v, want %+v", got, want)
	}
}
