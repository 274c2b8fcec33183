// Package llmtest is a scripted fake model server. It speaks the real wire
// formats of OpenAI Chat Completions (POST /v1/chat/completions), the OpenAI
// Responses API (POST /v1/responses), Anthropic Messages (POST /v1/messages,
// any query string, and /v1/messages/count_tokens) and the Gemini API
// (POST /v1beta/models/{model}:generateContent, :streamGenerateContent with
// or without alt=sse, :countTokens) over a real HTTP socket, streaming when
// the request asks for it and plain JSON otherwise, so the official SDKs,
// the Vercel AI SDK and the coding agents (Claude Code, Codex, Gemini CLI,
// opencode) talk to it as they would to a provider.
//
// Replies are chosen from the request content only, never from a request
// counter, because real agents make side calls (titles, summaries, retries) that
// would shift any counter. Each request is normalised into a [Conversation]
// (system text, ordered messages, offered tool names, model, API) and matched
// against the [Script]'s ordered rules; the first rule whose [Match] holds
// answers with its [Reply], or with its [Fault] (an HTTP error status, a cut
// stream, a malformed chunk, a hang). A request that no rule matches gets HTTP
// 400 in the API's own error format, so a missing rule is loud in tests.
// Token counts are answered outside the rules, from the body's size.
//
// Agents name the same MCP tool differently (mcp__runnel__echo, namespace
// mcp__runnel + echo, mcp_runnel_echo, runnel_echo, echo). A rule that names
// the MCP tool reference "runnel/echo" in Match.HasTool or in a reply's
// ToolCall.Name holds for, and calls, whichever spelling the request offers;
// [Conversation.ResolveTool] gives the exact rule.
//
// The happy path in a test:
//
//	srv := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{
//		{When: llmtest.Match{LastRole: "tool"}, Reply: llmtest.Reply{Text: "Done: {{last_tool_result}}"}},
//		{When: llmtest.Match{HasTool: "get_weather"}, Reply: llmtest.Reply{
//			ToolCalls: []llmtest.ToolCall{{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}},
//		}},
//	}})
//	defer srv.Close()
//	// OpenAI clients use srv.URL+"/v1" as base URL; Anthropic and Gemini
//	// clients (GOOGLE_GEMINI_BASE_URL) use srv.URL.
//
// `runnel mockllm` runs the same handler through [Serve] with a script loaded by
// [LoadScript]; examples/mockllm documents the JSON form.
package llmtest
