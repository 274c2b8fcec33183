package llmtest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestResolveTool(t *testing.T) {
	cases := []struct {
		name      string
		api       string
		tools     []string
		ref       string
		ns, want  string
		wantFound bool
	}{
		{"claude", APIMessages, []string{"Bash", "mcp__runnel__echo"}, "runnel/echo", "", "mcp__runnel__echo", true},
		{"codex namespace", APIResponses, []string{"exec_command", "mcp__runnel", "mcp__runnel.echo"}, "runnel/echo", "mcp__runnel", "echo", true},
		{"gemini", APIGemini, []string{"read_file", "mcp_runnel_echo"}, "runnel/echo", "", "mcp_runnel_echo", true},
		{"opencode", APIMessages, []string{"bash", "runnel_echo"}, "runnel/echo", "", "runnel_echo", true},
		{"pi", APIMessages, []string{"read", "echo"}, "runnel/echo", "", "echo", true},
		{"chat", APIChat, []string{"runnel_echo"}, "runnel/echo", "", "runnel_echo", true},
		{"most specific spelling wins", APIMessages, []string{"echo", "runnel_echo", "mcp__runnel__echo"}, "runnel/echo", "", "mcp__runnel__echo", true},
		{"namespace before a flat name", APIResponses, []string{"mcp__runnel__echo", "mcp__runnel.echo"}, "runnel/echo", "mcp__runnel", "echo", true},
		{"other server's tool is no match", APIMessages, []string{"mcp__other__echo"}, "runnel/echo", "", "runnel/echo", false},
		{"another namespace is no match", APIResponses, []string{"mcp__other.echo"}, "runnel/echo", "", "runnel/echo", false},
		{"not offered", APIMessages, []string{"Bash"}, "runnel/echo", "", "runnel/echo", false},
		{"nothing offered", APIMessages, nil, "runnel/echo", "", "runnel/echo", false},
		{"sanitised server name", APIMessages, []string{"mcp__my_srv__echo"}, "my.srv/echo", "", "mcp__my_srv__echo", true},
		{"the request's own spelling comes back", APIGemini, []string{"mcp_my.srv_echo"}, "my.srv/echo", "", "mcp_my.srv_echo", true},
		{"a dot splits only on the Responses API", APIGemini, []string{"mcp__runnel.echo"}, "runnel/echo", "", "runnel/echo", false},
		{"plain name offered", APIMessages, []string{"get_weather"}, "get_weather", "", "get_weather", true},
		{"plain name is exact", APIMessages, []string{"mcp__runnel__echo"}, "echo", "", "echo", false},
		{"plain name with a dot is kept", APIResponses, []string{"mcp__runnel.echo"}, "mcp__runnel.echo", "", "mcp__runnel.echo", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Conversation{API: tc.api, Tools: tc.tools}
			ns, got, ok := c.ResolveTool(tc.ref)
			if ns != tc.ns || got != tc.want || ok != tc.wantFound {
				t.Errorf("ResolveTool(%q) = %q, %q, %v; want %q, %q, %v", tc.ref, ns, got, ok, tc.ns, tc.want, tc.wantFound)
			}
			if c.HasTool(tc.ref) != tc.wantFound {
				t.Errorf("HasTool(%q) = %v", tc.ref, !tc.wantFound)
			}
		})
	}
}

func TestToolReferenceValidation(t *testing.T) {
	for _, bad := range []string{"runnel/", "/echo", "a/b/c", "/"} {
		for _, js := range []string{
			`{"rules":[{"reply":{"toolCalls":[{"name":"` + bad + `"}]}}]}`,
			`{"rules":[{"when":{"hasTool":"` + bad + `"}}]}`,
		} {
			if _, err := ParseScript([]byte(js)); err == nil || !strings.Contains(err.Error(), "server/tool") {
				t.Errorf("%s: error %v", js, err)
			}
		}
	}
	if _, err := ParseScript([]byte(`{"rules":[{"when":{"hasTool":"runnel/echo"},"reply":{"toolCalls":[{"name":"runnel/echo"}]}}]}`)); err != nil {
		t.Errorf("a valid reference: %v", err)
	}
}

// oneScript is the rule the agent matrix uses: one rule for every agent.
func oneScript() Rule {
	return Rule{
		Name: "call-echo",
		When: Match{LastUserContains: "echo", HasTool: "runnel/echo", ToolResultsBelow: intp(1)},
		Reply: Reply{ToolCalls: []ToolCall{
			{ID: "call_1", Name: "runnel/echo", Arguments: json.RawMessage(`{"text":"hi"}`)},
		}},
	}
}

// One reference reaches every agent's spelling of the tool, over each API's
// real request format, streamed and not.
func TestToolReferencePerAPI(t *testing.T) {
	cases := []struct {
		agent, path, body string
		// want is what the reply's wire must carry.
		want []string
	}{
		{"claude", "/v1/messages?beta=true",
			`{"model":"m","stream":%s,"max_tokens":10,"messages":[{"role":"user","content":"echo it"}],"tools":[{"name":"Bash"},{"name":"mcp__runnel__echo"}]}`,
			[]string{`"name":"mcp__runnel__echo"`}},
		{"opencode", "/v1/messages",
			`{"model":"m","stream":%s,"max_tokens":10,"messages":[{"role":"user","content":"echo it"}],"tools":[{"name":"runnel_echo"}]}`,
			[]string{`"name":"runnel_echo"`}},
		{"pi", "/v1/messages",
			`{"model":"m","stream":%s,"max_tokens":10,"messages":[{"role":"user","content":"echo it"}],"tools":[{"name":"echo"}]}`,
			[]string{`"name":"echo"`}},
		{"codex", "/v1/responses",
			`{"model":"m","stream":%s,"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"echo it"}]}],
			"tools":[{"type":"function","name":"exec_command"},{"type":"namespace","name":"mcp__runnel","description":"d","tools":[{"type":"function","name":"echo","parameters":{}}]}]}`,
			[]string{`"name":"echo","namespace":"mcp__runnel"`}},
		{"chat client", "/v1/chat/completions",
			`{"model":"m","stream":%s,"messages":[{"role":"user","content":"echo it"}],"tools":[{"type":"function","function":{"name":"runnel_echo"}}]}`,
			[]string{`"name":"runnel_echo"`}},
	}
	for _, tc := range cases {
		for _, stream := range []string{"false", "true"} {
			t.Run(tc.agent+"/stream="+stream, func(t *testing.T) {
				srv := start(t, oneScript())
				status, body := post(t, srv, tc.path, strings.Replace(tc.body, "%s", stream, 1))
				if status != http.StatusOK {
					t.Fatalf("status %d: %s", status, body)
				}
				for _, w := range tc.want {
					if !bytes.Contains(body, []byte(w)) {
						t.Errorf("reply lacks %s:\n%s", w, body)
					}
				}
				if bytes.Contains(body, []byte("runnel/echo")) {
					t.Errorf("the reference itself went out:\n%s", body)
				}
			})
		}
	}
	t.Run("gemini", func(t *testing.T) {
		srv := start(t, oneScript())
		body := `{"contents":[{"role":"user","parts":[{"text":"echo it"}]}],"tools":[{"functionDeclarations":[{"name":"read_file"},{"name":"mcp_runnel_echo"}]}]}`
		chunks, err := geminiStream(t.Context(), t, srv, "m", body, func(int) {})
		if err != nil {
			t.Fatal(err)
		}
		parts := partsOf(chunks)
		if len(parts) != 1 || parts[0].FunctionCall == nil || parts[0].FunctionCall.Name != "mcp_runnel_echo" {
			t.Errorf("parts %+v", parts)
		}
	})
	t.Run("not offered", func(t *testing.T) {
		srv := start(t, oneScript(), Rule{Name: "fallback", Reply: Reply{Text: "no echo here"}})
		_, body := post(t, srv, "/v1/messages", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"echo it"}],"tools":[{"name":"Bash"}]}`)
		if !bytes.Contains(body, []byte("no echo here")) {
			t.Errorf("a request offering no spelling matched the rule:\n%s", body)
		}
	})
}

// Codex sends the call back with its namespace, and the tool result after it.
func TestResponsesNamespaceRoundTrip(t *testing.T) {
	srv := start(t, Rule{When: Match{LastRole: RoleTool}, Reply: Reply{Text: "got {{last_tool_result}}"}})
	body := `{"model":"m","input":[
		{"type":"message","role":"user","content":[{"type":"input_text","text":"echo it"}]},
		{"type":"function_call","name":"echo","namespace":"mcp__runnel","arguments":"{\"text\":\"hi\"}","call_id":"call_1"},
		{"type":"function_call_output","call_id":"call_1","output":[{"type":"input_text","text":"Wall time: 0.01 seconds\nOutput:"},{"type":"input_text","text":"echo: hi"}]}],
		"tools":[{"type":"namespace","name":"mcp__runnel","tools":[{"type":"function","name":"echo"}]}]}`
	if status, got := post(t, srv, "/v1/responses", body); status != 200 || !bytes.Contains(got, []byte("echo: hi")) {
		t.Fatalf("status %d: %s", status, got)
	}
	want := Conversation{API: APIResponses, Model: "m",
		Messages: []Message{
			{Role: RoleUser, Text: "echo it"},
			{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call_1", Name: "echo", Namespace: "mcp__runnel", Arguments: json.RawMessage(`{"text":"hi"}`)}}},
			{Role: RoleTool, ToolResults: []ToolResult{{CallID: "call_1", Text: "Wall time: 0.01 seconds\nOutput:\necho: hi"}}},
		},
		Tools: []string{"mcp__runnel", "mcp__runnel.echo"}}
	if diff := cmp.Diff(want, srv.Requests()[0].Conversation); diff != "" {
		t.Errorf("conversation (-want +got):\n%s", diff)
	}
}
