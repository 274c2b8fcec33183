package permission_test

import (
	"encoding/json"
	"fmt"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/permission"
)

// A paused turn is resumed: the person approved the first command and
// denied the second.
func Example() {
	plan := permission.ParsePlan(json.RawMessage(`{"default":"ask","rules":[{"pattern":"Bash(git status:*)","permission":"allow"}]}`))
	history := []runnel.Message{
		runnel.UserText("tidy the repo"),
		{Role: runnel.RoleAssistant, Content: []runnel.Block{
			{Type: runnel.BlockToolCall, ToolCallID: "c1", ToolName: "bash", Input: json.RawMessage(`{"command":"make clean"}`)},
			{Type: runnel.BlockToolCall, ToolCallID: "c2", ToolName: "bash", Input: json.RawMessage(`{"command":"git clean -fdx"}`)},
		}},
		{Role: runnel.RoleUser, Content: []runnel.Block{
			{Type: runnel.BlockToolResult, ToolCallID: "c1", Kind: "approval", Output: json.RawMessage(`{"approved":true}`)},
			{Type: runnel.BlockToolResult, ToolCallID: "c2", Kind: "approval", Output: json.RawMessage(`{"approved":false,"reason":"too much"}`)},
		}},
	}
	store := permission.Extract(history, permission.ExtractOptions{})
	for _, c := range []struct{ id, command string }{{"c1", "make clean"}, {"c2", "git clean -fdx"}, {"c3", "git status"}, {"c4", "rm -rf /"}} {
		args, _ := json.Marshal(map[string]string{"command": c.command})
		key, _ := permission.Key("bash", args, permission.KeyOptions{})
		gate := permission.Gate{Executor: permission.ExecutorRelay, ToolName: "bash", Args: args,
			Argument: permission.StringMember(args, "command")}
		verdict, decision := plan.Decide(gate, store, permission.CallRef{ID: c.id, Name: "bash", Key: key})
		if decision != nil && decision.Reason != "" {
			fmt.Printf("%s: %s (%s)\n", c.command, verdict, decision.Reason)
			continue
		}
		fmt.Printf("%s: %s\n", c.command, verdict)
	}
	// Output:
	// make clean: allow
	// git clean -fdx: deny (too much)
	// git status: allow
	// rm -rf /: pendingApproval
}

func ExampleKey() {
	key, ok := permission.Key("mcp__memory__search",
		json.RawMessage(`{"query": "{\"tags\": [\"b\", \"a\"]}}", "limit": 10.0}`),
		permission.KeyOptions{Servers: []string{"memory"}})
	fmt.Println(key, ok)
	// Output: search#{"limit":10,"query":{"tags":["b","a"]}} true
}
