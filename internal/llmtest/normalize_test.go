package llmtest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// weatherConversation is the normalised form of the history every SDK sends
// in TestNormalizeSDKRequests: one tool round trip, then a new user message.
func weatherConversation(api string) Conversation {
	return Conversation{
		API:    api,
		Model:  "m",
		System: "You are helpful.",
		Messages: []Message{
			{Role: RoleUser, Text: "What's the weather in Paris?"},
			{Role: RoleAssistant, Text: "Checking.", ToolCalls: []ToolCall{
				{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)},
			}},
			{Role: RoleTool, ToolResults: []ToolResult{{CallID: "call_1", Text: "sunny"}}},
			{Role: RoleUser, Text: "thanks"},
		},
		Tools: []string{"get_weather"},
	}
}

// The same history sent by each official SDK normalises to the same view.
func TestNormalizeSDKRequests(t *testing.T) {
	srv := start(t, Rule{Reply: Reply{Text: "ok"}})
	ctx := context.Background()

	oc := openaiClient(t, srv)
	_, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "m",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("You are helpful."),
			openai.UserMessage("What's the weather in Paris?"),
			{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
				Content: openai.ChatCompletionAssistantMessageParamContentUnion{OfString: openai.String("Checking.")},
				ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID:       "call_1",
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: `{"city": "Paris"}`},
				}}},
			}},
			openai.ToolMessage("sunny", "call_1"),
			openai.UserMessage("thanks"),
		},
		Tools: []openai.ChatCompletionToolUnionParam{
			openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather"}),
		},
	})
	if err != nil {
		t.Fatalf("chat: %v", err)
	}

	_, err = oc.Responses.New(ctx, responses.ResponseNewParams{
		Model:        "m",
		Instructions: openai.String("You are helpful."),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("What's the weather in Paris?", responses.EasyInputMessageRoleUser),
			responses.ResponseInputItemParamOfMessage("Checking.", responses.EasyInputMessageRoleAssistant),
			responses.ResponseInputItemParamOfFunctionCall(`{"city":"Paris"}`, "call_1", "get_weather"),
			{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
				CallID: openai.String("call_1"),
				Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String("sunny")},
			}},
			responses.ResponseInputItemParamOfMessage("thanks", responses.EasyInputMessageRoleUser),
		}},
		Tools: []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather", map[string]any{"type": "object"}, false)},
	})
	if err != nil {
		t.Fatalf("responses: %v", err)
	}

	ac := anthropicClient(t, srv)
	_, err = ac.Messages.New(ctx, anthropic.MessageNewParams{
		Model:     "m",
		MaxTokens: 100,
		System:    []anthropic.TextBlockParam{{Text: "You are helpful."}},
		Messages: []anthropic.MessageParam{
			anthropic.NewUserMessage(anthropic.NewTextBlock("What's the weather in Paris?")),
			anthropic.NewAssistantMessage(
				anthropic.NewTextBlock("Checking."),
				anthropic.NewToolUseBlock("call_1", map[string]any{"city": "Paris"}, "get_weather"),
			),
			// Anthropic answers tools inside a user message, here with new text after.
			anthropic.NewUserMessage(anthropic.NewToolResultBlock("call_1", "sunny", false), anthropic.NewTextBlock("thanks")),
		},
		Tools: []anthropic.ToolUnionParam{anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{}, "get_weather")},
	})
	if err != nil {
		t.Fatalf("messages: %v", err)
	}

	reqs := srv.Requests()
	if len(reqs) != len(apis) {
		t.Fatalf("%d requests recorded, want %d", len(reqs), len(apis))
	}
	for i, api := range apis {
		if diff := cmp.Diff(weatherConversation(api), reqs[i].Conversation); diff != "" {
			t.Errorf("%s conversation (-want +got):\n%s", api, diff)
		}
		if reqs[i].Rule != "rule 0" || reqs[i].API != api {
			t.Errorf("%s recorded as api %q rule %q", api, reqs[i].API, reqs[i].Rule)
		}
	}
}

// Shapes the SDKs above do not produce but real clients send.
func TestNormalizeShapes(t *testing.T) {
	cases := []struct {
		name, api, body string
		want            Conversation
	}{
		{
			name: "chat content parts, developer role, reasoning, custom tool",
			api:  APIChat,
			body: `{"model":"m","stream":true,"messages":[
				{"role":"developer","content":[{"type":"text","text":"Be brief."}]},
				{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"here"}]},
				{"role":"assistant","content":null,"reasoning_content":"hmm","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"not json"}}]},
				{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"done"}]}],
				"tools":[{"type":"function","function":{"name":"f"}},{"type":"custom","custom":{"name":"g"}}]}`,
			want: Conversation{API: APIChat, Model: "m", Stream: true, System: "Be brief.",
				Messages: []Message{
					{Role: RoleUser, Text: "look\nhere"},
					{Role: RoleAssistant, Reasoning: "hmm", ToolCalls: []ToolCall{{ID: "c1", Name: "f", Arguments: json.RawMessage(`"not json"`)}}},
					{Role: RoleTool, ToolResults: []ToolResult{{CallID: "c1", Text: "done"}}},
				},
				Tools: []string{"f", "g"}},
		},
		{
			name: "responses typed message items, reasoning item, developer item, array output",
			api:  APIResponses,
			body: `{"model":"m","input":[
				{"type":"message","role":"developer","content":[{"type":"input_text","text":"Rules."}]},
				{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]},
				{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"plan"}]},
				{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]},
				{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},
				{"type":"function_call","call_id":"c2","name":"f","arguments":""},
				{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"r1"}]},
				{"type":"function_call_output","call_id":"c2","output":"r2"},
				{"type":"item_reference","id":"x"}],
				"tools":[{"type":"function","name":"f"},{"type":"web_search"}]}`,
			want: Conversation{API: APIResponses, Model: "m", System: "Rules.",
				Messages: []Message{
					{Role: RoleUser, Text: "go"},
					{Role: RoleAssistant, Text: "ok", Reasoning: "plan", ToolCalls: []ToolCall{
						{ID: "c1", Name: "f", Arguments: json.RawMessage(`{}`)}, {ID: "c2", Name: "f"},
					}},
					{Role: RoleTool, ToolResults: []ToolResult{{CallID: "c1", Text: "r1"}, {CallID: "c2", Text: "r2"}}},
				},
				Tools: []string{"f"}},
		},
		{
			name: "responses namespace tools, additional_tools item, namespaced call",
			api:  APIResponses,
			body: `{"model":"m","input":[
				{"type":"additional_tools","role":"developer","tools":[{"type":"namespace","name":"functions","tools":[{"type":"custom","name":"exec"}]}]},
				{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]},
				{"type":"function_call","call_id":"c1","namespace":"mcp__s","name":"t","arguments":"{}"}],
				"tools":[{"type":"function","name":"f"},{"type":"namespace","name":"mcp__s","description":"d","tools":[{"type":"function","name":"t"},{"type":"function","name":"u"}]},{"type":"web_search"}]}`,
			want: Conversation{API: APIResponses, Model: "m",
				Messages: []Message{
					{Role: RoleUser, Text: "go"},
					{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Name: "t", Namespace: "mcp__s", Arguments: json.RawMessage(`{}`)}}},
				},
				Tools: []string{"functions", "functions.exec", "f", "mcp__s", "mcp__s.t", "mcp__s.u"}},
		},
		{
			name: "messages system message among the messages (Claude Code)",
			api:  APIMessages,
			body: `{"model":"m","system":[{"type":"text","text":"A"}],"messages":[
				{"role":"user","content":[{"type":"text","text":"hi"}]},
				{"role":"system","content":[{"type":"text","text":"# Environment"}]}]}`,
			want: Conversation{API: APIMessages, Model: "m", System: "A\n# Environment",
				Messages: []Message{{Role: RoleUser, Text: "hi"}}},
		},
		{
			name: "messages string content, system blocks, thinking, error result alone",
			api:  APIMessages,
			body: `{"model":"m","stream":true,"system":[{"type":"text","text":"A"},{"type":"text","text":"B"}],"messages":[
				{"role":"user","content":"hi"},
				{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"tool_use","id":"t1","name":"f","input":{"a": 1}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","is_error":true,"content":[{"type":"text","text":"boom"}]}]}]}`,
			want: Conversation{API: APIMessages, Model: "m", Stream: true, System: "A\nB",
				Messages: []Message{
					{Role: RoleUser, Text: "hi"},
					{Role: RoleAssistant, Reasoning: "t", ToolCalls: []ToolCall{{ID: "t1", Name: "f", Arguments: json.RawMessage(`{"a":1}`)}}},
					{Role: RoleTool, ToolResults: []ToolResult{{CallID: "t1", Text: "boom", IsError: true}}},
				}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := normalize(tc.api, []byte(tc.body))
			if err != nil {
				t.Fatalf("normalize: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("conversation (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNormalizeRejectsNonObjects(t *testing.T) {
	for _, api := range allAPIs {
		bodies := []string{``, `[]`, `"x"`, `{`, `{"model":5}`}
		if api == APIGemini { // the model is in the path
			bodies[4] = `{"contents":{}}`
		}
		for _, body := range bodies {
			if _, err := normalize(api, []byte(body)); err == nil {
				t.Errorf("%s %q: no error", api, body)
			}
		}
	}
}

// FuzzNormalize checks that no body makes the normaliser, the rule matcher or
// the reply encoders panic, and that a normalised conversation always
// marshals (its tool arguments are valid JSON).
func FuzzNormalize(f *testing.F) {
	seeds := []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"assistant","tool_calls":[{"id":"1","function":{"name":"f","arguments":"{\"a\""}}]},{"role":"tool","content":null}]}`,
		`{"input":"hi","instructions":"sys"}`,
		`{"input":[{"role":"user","content":[{"type":"input_text","text":"x"}]},{"type":"function_call","arguments":{"a":1}},{"type":"function_call_output","output":7}]}`,
		`{"system":"s","messages":[{"role":"user","content":[{"type":"tool_result","content":"r"},{"type":"text","text":"t"}]}]}`,
		`{"messages":[{"role":"assistant","content":[{"type":"tool_use","input":[1,2]}]}],"tools":[{"name":"f"}]}`,
		`{"contents":[{"role":"user","parts":[{"text":"hi"}]},{"role":"model","parts":[{"functionCall":{"name":"f","args":[1]}}]},{"parts":[{"functionResponse":{"name":"f","response":7}}]}],"tools":[{"functionDeclarations":[{"name":"f"}]}]}`,
		`{"tools":[{"type":"namespace","name":"mcp__s","tools":[{"name":"f"}]}],"input":[{"type":"additional_tools","tools":[{"name":"g"}]}]}`,
	}
	for i, s := range seeds {
		f.Add(uint8(i), []byte(s))
	}
	reply := Reply{Text: "{{last_user}}|{{last_tool_result}}", Reasoning: "r",
		ToolCalls: []ToolCall{{Name: "f", Arguments: json.RawMessage(`{"x":1}`)}, {Name: "s/f"}}}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		api := allAPIs[int(which)%len(allAPIs)]
		c, err := normalize(api, body)
		if err != nil {
			return
		}
		if _, err := json.Marshal(c); err != nil {
			t.Fatalf("conversation does not marshal: %v", err)
		}
		Match{LastUserContains: "a", LastToolResultContains: "b", HasTool: "f", ToolResultsBelow: intp(3)}.matches(&c)
		o := resolve(reply, &c, body, "call_")
		for _, ev := range o.events(api) {
			if string(ev.data) != "[DONE]" && !json.Valid(ev.data) {
				t.Fatalf("invalid event data %s", ev.data)
			}
		}
		if !json.Valid(o.body(api)) {
			t.Fatalf("invalid body %s", o.body(api))
		}
		if api == APIGemini && !json.Valid(o.geminiArray()) {
			t.Fatalf("invalid chunk array %s", o.geminiArray())
		}
	})
}
