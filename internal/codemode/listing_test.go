package codemode

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestListTools(t *testing.T) {
	tests := []struct {
		name string
		tool Tool
		want string
	}{
		{
			name: "simple",
			tool: Tool{Server: "memory", Name: "add", Description: "Adds two numbers.",
				InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number","description":"The first."},"b":{"type":"integer","default":1}},"required":["a"]}`)},
			want: `/**
 * Adds two numbers.
 * @param {object} args
 * @param {number} args.a - The first.
 * @param {number} [args.b=1]
 */
async function tools.memory.add(args)
`,
		},
		{
			name: "comment end in the text",
			tool: Tool{Server: "s", Name: "t", Description: "Ends */ here.\n  Second line */",
				InputSchema: json.RawMessage(`{"type":"object","properties":{"mode":{"enum":["a*/b","c"],"description":"Not */ the end."}}}`)},
			want: `/**
 * Ends *\/ here.
 *   Second line *\/
 * @param {object} [args]
 * @param {"a*\/b"|"c"} [args.mode] - Not *\/ the end.
 */
async function tools.s.t(args)
`,
		},
		{
			name: "odd names",
			tool: Tool{Server: "my-server", Name: "my tool", InputSchema: json.RawMessage(`{"type":"object","properties":{"odd-key":{"type":"boolean"},"ok_key":{"type":"string"}},"required":["odd-key"]}`)},
			want: `/**
 * @param {object} args
 * @param {boolean} args["odd-key"]
 * @param {string} [args.ok_key]
 */
async function tools["my-server"]["my tool"](args)
`,
		},
		{
			name: "no arguments",
			tool: Tool{Server: "s", Name: "ping", Description: "Ping.", InputSchema: json.RawMessage(`{"type":"object"}`)},
			want: `/**
 * Ping.
 * @param {object} [args]
 */
async function tools.s.ping(args)
`,
		},
		{
			name: "no schema",
			tool: Tool{Server: "s", Name: "t"},
			want: `/**
 * @param {any} args
 */
async function tools.s.t(args)
`,
		},
		{
			name: "nested, arrays, refs and unions",
			tool: Tool{Server: "gh", Name: "search", InputSchema: json.RawMessage(`{"type":"object",
"$defs":{"Label":{"type":"object","properties":{"name":{"type":"string"},"color":{"type":["string","null"]}},"required":["name"]}},
"properties":{
	"query":{"type":"string","description":"Search text.\n  Multi-line."},
	"labels":{"type":"array","items":{"$ref":"#/$defs/Label"},"description":"Labels to match."},
	"filter":{"type":"object","properties":{"since":{"type":"string","format":"date-time"},"deep":{"type":"object","properties":{"x":{"type":"object","properties":{"y":{"type":"number"}}}}}}},
	"meta":{"type":"object","additionalProperties":{"type":"string"}},
	"ids":{"type":"array","items":{"anyOf":[{"type":"string"},{"type":"number"}]}},
	"pair":{"type":"array","prefixItems":[{"type":"string"},{"type":"number"}]},
	"old_tuple":{"type":"array","items":[{"type":"boolean"}]},
	"anything":{},
	"never":false,
	"nullable":{"type":"string","nullable":true},
	"one":{"oneOf":[{"const":"x"},{"type":"null"}]},
	"both":{"allOf":[{"type":"object","properties":{"a":{"type":"string"}}},{"type":"object","properties":{"b":{"type":"number"}}}]},
	"missing_ref":{"$ref":"#/$defs/Nope"},
	"remote_ref":{"$ref":"https://example.com/schema"}
},"required":["query"]}`),
				OutputSchema: json.RawMessage(`{"type":"object","properties":{"total":{"type":"integer"},"items":{"type":"array","items":{"type":"object","properties":{"id":{"type":"number"}}}}}}`)},
			want: `/**
 * @param {object} args
 * @param {string} args.query - Search text. Multi-line.
 * @param {object[]} [args.labels] - Labels to match.
 * @param {string} args.labels[].name
 * @param {string|null} [args.labels[].color]
 * @param {object} [args.filter]
 * @param {string} [args.filter.since] - (date-time)
 * @param {object} [args.filter.deep]
 * @param {{y?: number}} [args.filter.deep.x]
 * @param {{[key: string]: string}} [args.meta]
 * @param {(string|number)[]} [args.ids]
 * @param {[string, number]} [args.pair]
 * @param {[boolean]} [args.old_tuple]
 * @param {any} [args.anything]
 * @param {never} [args.never]
 * @param {string|null} [args.nullable]
 * @param {"x"|null} [args.one]
 * @param {{a?: string} & {b?: number}} [args.both]
 * @param {any} [args.missing_ref]
 * @param {any} [args.remote_ref]
 * @returns {Promise<{total?: number, items?: {id?: number}[]}>}
 */
async function tools.gh.search(args)
`,
		},
		{
			name: "recursive ref",
			tool: Tool{Server: "s", Name: "tree", InputSchema: json.RawMessage(`{"$ref":"#/definitions/Node","definitions":{"Node":{"type":"object","properties":{"children":{"type":"array","items":{"$ref":"#/definitions/Node"}}}}}}`)},
			want: `/**
 * @param {object} [args]
 * @param {object[]} [args.children]
 * @param {object[]} [args.children[].children]
 * @param {{children?: any[]}[]} [args.children[].children[].children]
 */
async function tools.s.tree(args)
`,
		},
		{
			name: "not an object",
			tool: Tool{Server: "s", Name: "t", InputSchema: json.RawMessage(`{"type":"array","items":{"type":"string"}}`)},
			want: `/**
 * @param {string[]} args
 */
async function tools.s.t(args)
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ListTools([]Tool{tt.tool})
			block, ok := strings.CutPrefix(got, listingHeader+"\n")
			if !ok {
				t.Fatalf("listing does not start with the header:\n%s", got)
			}
			if diff := cmp.Diff(tt.want, block); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestListToolsOrder(t *testing.T) {
	got := ListTools([]Tool{{Server: "b", Name: "y"}, {Server: "a", Name: "z"}, {Server: "b", Name: "x"}, {Server: "a", Name: "z"}})
	var signatures []string
	for _, line := range strings.Split(got, "\n") {
		if strings.HasPrefix(line, "async function ") {
			signatures = append(signatures, line)
		}
	}
	want := []string{"async function tools.a.z(args)", "async function tools.b.x(args)", "async function tools.b.y(args)"}
	if diff := cmp.Diff(want, signatures); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if empty := ListTools(nil); empty != listingHeader+"\n// No MCP tools are available.\n" {
		t.Errorf("ListTools(nil) = %q", empty)
	}
}

// TestListToolsIsJavaScript checks that every comment in a listing closes
// where it should: with the signatures turned into assignments, the listing
// must parse as JavaScript in the sandbox.
func TestListToolsIsJavaScript(t *testing.T) {
	tools := []Tool{
		{Server: "s", Name: "a", Description: "x */ y /* z", InputSchema: json.RawMessage(`{"type":"object","properties":{"k":{"enum":["*/"],"description":"*/"}}}`)},
		{Server: "odd-server", Name: "odd\"name", Description: "*/*/*/"},
	}
	listing := ListTools(tools)
	var js strings.Builder
	js.WriteString("const tools = {s: {}, \"odd-server\": {}};\n")
	for _, line := range strings.Split(listing, "\n") {
		if sig, ok := strings.CutPrefix(line, "async function "); ok {
			line = strings.TrimSuffix(sig, "(args)") + " = async function (args) {};"
		}
		js.WriteString(line + "\n")
	}
	js.WriteString(`return Object.keys(tools["odd-server"])`)
	out := run(t, &recorder{}, js.String(), nil)
	if diff := cmp.Diff(got{Result: `["odd\"name"]`, Logs: []string{}}, view(out)); diff != "" {
		t.Errorf("(-want +got):\n%s\nscript:\n%s", diff, js.String())
	}
}

func ExampleListTools() {
	fmt.Print(ListTools([]Tool{{
		Server:      "memory",
		Name:        "add",
		Description: "Adds two numbers.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`),
	}}))
	// Output:
	// // MCP tools for run_mcp_script. Write plain JavaScript (not TypeScript); the script is the body of an async function.
	// // Call a tool as `await tools.<server>.<tool>({...})`: it resolves to the tool's result (parsed JSON when the result is JSON, otherwise text) and rejects with an Error when the tool fails.
	// // `return` the value you want back (it is sent as JSON); console.log output is captured and returned in logs.
	// // There is no require, import, fetch, process, filesystem or timers. A tool that needs the user's approval cannot run inside a script: call it directly.
	//
	// /**
	//  * Adds two numbers.
	//  * @param {object} args
	//  * @param {number} args.a
	//  * @param {number} args.b
	//  */
	// async function tools.memory.add(args)
}
