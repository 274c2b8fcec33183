package permission

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParsePlan(t *testing.T) {
	rule := func(pattern string, p Permission) Rule { return Rule{Pattern: pattern, Permission: p} }
	tests := []struct {
		name string
		raw  string
		want Plan
	}{
		{"absent", ``, Plan{Default: AllowReads}},
		{"null", `null`, Plan{Default: AllowReads}},
		{"empty object", `{}`, Plan{Default: AllowReads}},
		{"null default", `{"default":null}`, Plan{Default: AllowReads}},
		{"each default", `{"default":"deny"}`, Plan{Default: Deny}},
		// A validator in front of runnel reads no default here; runnel must
		// not read "allow" (encoding/json would): it asks instead.
		{"member name in another case", `{"Default":"allow"}`,
			Plan{Default: Ask, Malformed: `permissions has the member "Default"; member names are case-sensitive: write "default"`}},
		{"a member twice", `{"default":"deny","default":"allow"}`,
			Plan{Default: Ask, Malformed: `permissions is not valid JSON (it has the member "default" twice)`}},
		{"rule member in another case is dropped", `{"default":"allow","rules":[{"pattern":"Bash(rm:*)","Permission":"deny"}]}`,
			Plan{Default: Allow, Dropped: []string{`{"pattern":"Bash(rm:*)","Permission":"deny"}`}}},
		{"one member in two cases anywhere", `{"default":"allow","rules":[{"pattern":"Bash(rm:*)","Permission":"allow","permission":"deny"}]}`,
			Plan{Default: Ask, Malformed: `permissions is not valid JSON (it has the members "Permission" and "permission", which differ only in case (at /rules/0))`}},
		{"unknown default", `{"default":"yolo","rules":[{"pattern":"Bash","permission":"allow"}]}`,
			Plan{Default: Ask, Malformed: `permissions.default "yolo" is not allow, ask, deny or allow_reads`}},
		{"default in the wrong case", `{"default":"Allow"}`,
			Plan{Default: Ask, Malformed: `permissions.default "Allow" is not allow, ask, deny or allow_reads`}},
		{"default not a string", `{"default":1}`,
			Plan{Default: Ask, Malformed: `permissions.default 1 is not allow, ask, deny or allow_reads`}},
		{"not an object", `"allow"`, Plan{Default: Ask, Malformed: "permissions must be an object"}},
		{"an array", `[]`, Plan{Default: Ask, Malformed: "permissions must be an object"}},
		{"rules not an array", `{"default":"deny","rules":{"pattern":"Bash"}}`,
			Plan{Default: Ask, Malformed: "permissions.rules must be an array"}},
		{"rules", `{"default":"allow","rules":[{"pattern":"Bash(npm run:*)","permission":"deny"},{"pattern":"Read","permission":"ask"}]}`,
			Plan{Default: Allow, Rules: []Rule{rule("Bash(npm run:*)", Deny), rule("Read", Ask)}}},
		{"malformed rules dropped", `{"default":"ask","rules":[
			{"pattern":"Bash","permission":"allow"},
			"Bash",
			{"pattern":"Bash"},
			{"pattern":"Bash","permission":"allow_reads"},
			{"pattern":"Bash","permission":"ALLOW"},
			{"pattern":7,"permission":"deny"},
			{"pattern":"","permission":"deny"},
			{"pattern":"Bash(npm","permission":"deny"},
			{"pattern":"Bash()","permission":"deny"},
			{"pattern":"my tool","permission":"deny"},
			{"pattern":"(ls)","permission":"deny"},
			null]}`,
			Plan{Default: Ask, Rules: []Rule{rule("Bash", Allow)}, Dropped: []string{
				`"Bash"`,
				`{"pattern":"Bash"}`,
				`{"pattern":"Bash","permission":"allow_reads"}`,
				`{"pattern":"Bash","permission":"ALLOW"}`,
				`{"pattern":7,"permission":"deny"}`,
				`{"pattern":"","permission":"deny"}`,
				`{"pattern":"Bash(npm","permission":"deny"}`,
				`{"pattern":"Bash()","permission":"deny"}`,
				`{"pattern":"my tool","permission":"deny"}`,
				`{"pattern":"(ls)","permission":"deny"}`,
				`null`,
			}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ParsePlan(json.RawMessage(tt.raw))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParsePlan(%s) (-want +got)\n%s", tt.raw, diff)
			}
		})
	}
}

func TestParsePlanClipsDroppedRules(t *testing.T) {
	long := `{"pattern":"` + strings.Repeat("y", 300) + `"}`
	got := ParsePlan(json.RawMessage(`{"rules":[` + long + `]}`))
	if len(got.Dropped) != 1 || len(got.Dropped[0]) != 200+len("…") {
		t.Fatalf("Dropped = %q, want one entry cut to 200 bytes", got.Dropped)
	}
}

func TestRuleMatching(t *testing.T) {
	arg := func(s string) *string { return &s }
	tests := []struct {
		name     string
		pattern  string
		tool     string
		argument *string
		want     ruleMatch
	}{
		{"name", "fetch", "fetch", nil, matches},
		{"name is case-sensitive", "fetch", "Fetch", nil, noMatch},
		{"builtin name in any case", "Bash", "bash", arg("ls"), matches},
		{"builtin rule in lower case", "read", "Read", nil, matches},
		{"name match ignores the argument", "Bash", "Bash", nil, matches},
		{"prefix", "Bash(npm run:*)", "Bash", arg("npm run test"), matches},
		{"prefix is not infix", "Bash(npm run:*)", "Bash", arg("sudo npm run test"), noMatch},
		{"exact", "Bash(ls)", "Bash", arg("ls"), matches},
		{"exact is not prefix", "Bash(ls)", "Bash", arg("ls -la"), noMatch},
		{"empty prefix matches any string", "Bash(:*)", "Bash", arg(""), matches},
		{"parentheses inside the argument", "Bash(echo (hi):*)", "Bash", arg("echo (hi) there"), matches},
		{"no argument to inspect", "Bash(npm run:*)", "Bash", nil, uninspectable},
		{"another tool's rule", "Write(secret:*)", "Bash", arg("secret/x"), noMatch},
		{"a directory prefix covers the directory", "Write(secret/:*)", "Write", arg("secret"), matches},
		{"but not a sibling", "Write(secret/:*)", "Write", arg("secrets"), noMatch},
		{"a prefix without a slash names no directory", "Write(secret:*)", "Write", arg("secre"), noMatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Rule{Pattern: tt.pattern, Permission: Deny}
			if got := r.match(Gate{ToolName: tt.tool, Argument: tt.argument}); got != tt.want {
				t.Errorf("%s against %s %v = %v, want %v", tt.pattern, tt.tool, tt.argument, got, tt.want)
			}
		})
	}
}

// TestArgumentIsTheTools finds what a rule compares the way the tools
// read their arguments: a named member, never the first string the model
// happened to write.
func TestArgumentIsTheTools(t *testing.T) {
	member := []struct {
		args, name string
		want       *string
	}{
		{`{"description":"npm things","command":"rm -rf /"}`, "command", ptr("rm -rf /")},
		{`{"content":"1","path":"secret/x"}`, "path", ptr("secret/x")},
		{`{"command":42}`, "command", nil},
		{`{"command":["npm","test"]}`, "command", nil},
		{`{"COMMAND":"rm -rf /"}`, "command", nil},
		{`"{\"command\":\"rm -rf /\"}"`, "command", nil}, // not an object: the tool refuses it too
		{`{"url":"x`, "url", nil},
		{``, "url", nil},
		{`{"command":"rm -rf /","timeout":1e400}`, "command", ptr("rm -rf /")},
	}
	for _, tt := range member {
		if got := StringMember(json.RawMessage(tt.args), tt.name); !cmp.Equal(got, tt.want) {
			t.Errorf("StringMember(%s, %q) = %v, want %v", tt.args, tt.name, deref(got), deref(tt.want))
		}
	}
	schema := []struct{ schema, want string }{
		{`{"type":"object","properties":{"content":{"type":"string"},"path":{"type":"string"}}}`, "content"},
		{`{"properties":{"n":{"type":"integer"},"opts":{"type":"object"},"url":{"type":"string"}}}`, "url"},
		{`{"properties":{"z":{"type":["null","string"]},"a":{"type":"string"}}}`, "z"},
		{`{"properties":{"n":{"type":"number"}}}`, ""},
		{`{"type":"object"}`, ""},
		{`not json`, ""},
	}
	for _, tt := range schema {
		if got := SchemaArgument(json.RawMessage(tt.schema)); got != tt.want {
			t.Errorf("SchemaArgument(%s) = %q, want %q", tt.schema, got, tt.want)
		}
	}
}

func ptr(s string) *string { return &s }

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func TestEffective(t *testing.T) {
	yes, no := true, false
	plan := ParsePlan(json.RawMessage(`{"default":"allow_reads","rules":[
		{"pattern":"Bash","permission":"allow"},
		{"pattern":"Bash(git push:*)","permission":"ask"},
		{"pattern":"Bash(rm:*)","permission":"deny"},
		{"pattern":"Bash(rm:*)","permission":"allow"},
		{"pattern":"fetch(https://ok.example/:*)","permission":"allow"},
		{"pattern":"put(secret/:*)","permission":"deny"}]}`))
	bash := func(command string) Gate { return Gate{ToolName: "bash", Argument: &command} }
	tests := []struct {
		name string
		gate Gate
		want Permission
	}{
		{"allow rule", bash("ls"), Allow},
		{"ask beats allow", bash("git push origin"), Ask},
		{"deny beats allow whatever the order", bash("rm x"), Deny},
		{"spec beats rules", Gate{ToolName: "bash", SpecPermission: "allow", Argument: ptr("rm x")}, Allow},
		{"server beats rules", Gate{ToolName: "bash", ServerPermission: "ask", Argument: ptr("ls")}, Ask},
		// A deny rule that cannot see the argument asks: the Bash allow
		// rule alone would let the call through.
		{"deny rule without an argument to inspect asks", Gate{ToolName: "bash"}, Ask},
		{"allow rule without an argument to inspect does not match", Gate{ToolName: "fetch", ReadOnly: &no}, Ask},
		{"allow rule on its argument", Gate{ToolName: "fetch", Argument: ptr("https://ok.example/a"), ReadOnly: &no}, Allow},
		{"deny rule on its argument", Gate{ToolName: "put", Argument: ptr("secret/x"), ReadOnly: &yes}, Deny},
		{"deny rule that cannot inspect, on a read", Gate{ToolName: "put", ReadOnly: &yes}, Ask},
		{"deny rule on another argument", Gate{ToolName: "put", Argument: ptr("public/x"), ReadOnly: &yes}, Allow},
		{"unknown spec value asks", Gate{ToolName: "x", SpecPermission: "yes"}, Ask},
		{"spec allow_reads on a read", Gate{ToolName: "x", SpecPermission: "allow_reads", ReadOnly: &yes}, Allow},
		{"spec allow_reads on a write", Gate{ToolName: "x", SpecPermission: "allow_reads", ReadOnly: &no}, Ask},
		{"default read", Gate{ToolName: "x", ReadOnly: &yes}, Allow},
		{"default write", Gate{ToolName: "x", ReadOnly: &no}, Ask},
		{"default unknown", Gate{ToolName: "x"}, Ask},
		{"client tool follows the same function", Gate{Executor: ExecutorClient, ToolName: "x"}, Ask},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := plan.Effective(tt.gate); got != tt.want {
				t.Errorf("Effective = %q, want %q", got, tt.want)
			}
		})
	}
	if got := (Plan{}).Effective(Gate{ToolName: "x", ReadOnly: &yes}); got != Allow {
		t.Errorf("zero Plan on a read = %q, want allow (the zero Plan is allow_reads)", got)
	}
	if got := (Plan{}).Effective(Gate{ToolName: "x"}); got != Ask {
		t.Errorf("zero Plan on a write = %q, want ask", got)
	}
}

func TestDecideConsumesOnlyUnderAsk(t *testing.T) {
	store := &Store{}
	store.decisions.add("c1", "K", Decision{ToolCallID: "c1", Key: "K", Approved: false, Reason: "not now"})
	c1 := CallRef{ID: "c1", Key: "K"}
	allow := Plan{Default: Allow}
	if v, d := allow.Decide(Gate{ToolName: "x"}, store, c1); v != VerdictAllow || d != nil {
		t.Fatalf("allow plan: Decide = %q, %v; want allow and no decision", v, d)
	}
	ask := Plan{Default: Ask}
	v, d := ask.Decide(Gate{ToolName: "x"}, store, c1)
	if diff := cmp.Diff(&Decision{ToolCallID: "c1", Key: "K", Reason: "not now"}, d, cmpopts.EquateEmpty()); v != VerdictDeny || diff != "" {
		t.Fatalf("ask plan: Decide = %q, (-want +got) %s", v, diff)
	}
	if v, _ := ask.Decide(Gate{ToolName: "x"}, store, c1); v != VerdictPending {
		t.Fatalf("second Decide = %q, want pendingApproval: a decision is consumed once", v)
	}
	if v, _ := ask.Decide(Gate{ToolName: "x"}, nil, c1); v != VerdictPending {
		t.Fatalf("Decide with a nil store = %q, want pendingApproval", v)
	}
}
