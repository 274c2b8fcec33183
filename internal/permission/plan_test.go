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
		{"case-insensitive member names", `{"Default":"allow"}`, Plan{Default: Allow}},
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
	yes := true
	tests := []struct {
		name    string
		pattern string
		tool    string
		args    string
		match   bool
	}{
		{"name", "fetch", "fetch", `{}`, true},
		{"name is case-sensitive", "fetch", "Fetch", `{}`, false},
		{"builtin name in any case", "Bash", "bash", `{"command":"ls"}`, true},
		{"builtin rule in lower case", "read", "Read", `{}`, true},
		{"name match ignores arguments", "Bash", "Bash", `not json`, true},
		{"prefix", "Bash(npm run:*)", "Bash", `{"command":"npm run test"}`, true},
		{"prefix is not infix", "Bash(npm run:*)", "Bash", `{"command":"sudo npm run test"}`, false},
		{"exact", "Bash(ls)", "Bash", `{"command":"ls"}`, true},
		{"exact is not prefix", "Bash(ls)", "Bash", `{"command":"ls -la"}`, false},
		{"empty prefix matches any string", "Bash(:*)", "Bash", `{"command":""}`, true},
		{"parentheses inside the argument", "Bash(echo (hi):*)", "Bash", `{"command":"echo (hi) there"}`, true},
		{"Bash reads command, not the first string", "Bash(npm:*)", "Bash", `{"description":"npm things","command":"rm -rf /"}`, false},
		{"Bash command after another member", "Bash(rm:*)", "Bash", `{"description":"x","command":"rm -rf /"}`, true},
		{"Bash command not a string", "Bash(npm run:*)", "Bash", `{"command":42}`, false},
		{"Bash command array", "Bash(npm:*)", "Bash", `{"command":["npm","test"]}`, false},
		{"repeated member: last value counts", "Bash(rm:*)", "Bash", `{"command":"ls","command":"rm -rf /"}`, true},
		{"first string member in document order", "fetch(https://a:*)", "fetch", `{"z":"https://a.example","a":"https://b.example"}`, true},
		{"later string member is not first", "fetch(https://b:*)", "fetch", `{"z":"https://a.example","a":"https://b.example"}`, false},
		{"non-string members skipped", "fetch(https:*)", "fetch", `{"n":1,"opts":{"u":"x"},"url":"https://x"}`, true},
		{"repeated member keeps first position", "fetch(new:*)", "fetch", `{"a":"old","b":"other","a":"new"}`, true},
		{"array arguments", "fetch(x:*)", "fetch", `[1,"xyz"]`, true},
		{"string arguments", "fetch(x:*)", "fetch", `"xyz"`, true},
		{"stringified object arguments", "Bash(rm:*)", "Bash", `"{\"command\":\"rm -rf /\"}"`, true},
		{"no string at all", "fetch(x:*)", "fetch", `{"n":1}`, false},
		{"invalid JSON", "fetch(x:*)", "fetch", `{"url":"x`, false},
		{"absent arguments", "fetch(x:*)", "fetch", ``, false},
		{"huge number does not hide the command", "Bash(rm:*)", "Bash", `{"command":"rm -rf /","timeout":1e400}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Rule{Pattern: tt.pattern, Permission: Deny}
			g := Gate{ToolName: tt.tool, Args: json.RawMessage(tt.args), ReadOnly: &yes}
			if got := r.matches(g); got != tt.match {
				t.Errorf("%s matches %s %s = %v, want %v", tt.pattern, tt.tool, tt.args, got, tt.match)
			}
		})
	}
}

func TestEffective(t *testing.T) {
	yes, no := true, false
	plan := ParsePlan(json.RawMessage(`{"default":"allow_reads","rules":[
		{"pattern":"Bash","permission":"allow"},
		{"pattern":"Bash(git push:*)","permission":"ask"},
		{"pattern":"Bash(rm:*)","permission":"deny"},
		{"pattern":"Bash(rm:*)","permission":"allow"}]}`))
	tests := []struct {
		name string
		gate Gate
		want Permission
	}{
		{"allow rule", Gate{ToolName: "bash", Args: json.RawMessage(`{"command":"ls"}`)}, Allow},
		{"ask beats allow", Gate{ToolName: "bash", Args: json.RawMessage(`{"command":"git push origin"}`)}, Ask},
		{"deny beats allow whatever the order", Gate{ToolName: "bash", Args: json.RawMessage(`{"command":"rm x"}`)}, Deny},
		{"spec beats rules", Gate{ToolName: "bash", SpecPermission: "allow", Args: json.RawMessage(`{"command":"rm x"}`)}, Allow},
		{"server beats rules", Gate{ToolName: "bash", ServerPermission: "ask", Args: json.RawMessage(`{"command":"ls"}`)}, Ask},
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
	allow := Plan{Default: Allow}
	if v, d := allow.Decide(Gate{ToolName: "x"}, store, "c1", "K"); v != VerdictAllow || d != nil {
		t.Fatalf("allow plan: Decide = %q, %v; want allow and no decision", v, d)
	}
	ask := Plan{Default: Ask}
	v, d := ask.Decide(Gate{ToolName: "x"}, store, "c1", "K")
	if diff := cmp.Diff(&Decision{ToolCallID: "c1", Key: "K", Reason: "not now"}, d, cmpopts.EquateEmpty()); v != VerdictDeny || diff != "" {
		t.Fatalf("ask plan: Decide = %q, (-want +got) %s", v, diff)
	}
	if v, _ := ask.Decide(Gate{ToolName: "x"}, store, "c1", "K"); v != VerdictPending {
		t.Fatalf("second Decide = %q, want pendingApproval: a decision is consumed once", v)
	}
	if v, _ := ask.Decide(Gate{ToolName: "x"}, nil, "c1", "K"); v != VerdictPending {
		t.Fatalf("Decide with a nil store = %q, want pendingApproval", v)
	}
}
