package codemode

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"
)

// listingHeader tells the model, before any signature, how scripts work.
const listingHeader = `// MCP tools for run_mcp_script. Write plain JavaScript (not TypeScript); the script is the body of an async function.
// Call a tool as ` + "`await tools.<server>.<tool>({...})`" + `: it resolves to the tool's result (parsed JSON when the result is JSON, otherwise text) and rejects with an Error when the tool fails.
// ` + "`return`" + ` the value you want back (it is sent as JSON); console.log output is captured and returned in logs.
// There is no require, import, fetch, process, filesystem or timers. A tool that needs the user's approval cannot run inside a script: call it directly.
`

// maxNestedParams is how deep the listing writes nested properties as
// @param lines of their own; deeper ones are written as inline types.
const maxNestedParams = 3

// maxDefault is the longest default value written into a @param.
const maxDefault = 40

// ListTools returns the list_mcp_tools output: a header saying how scripts
// work, then for each tool a JSDoc comment built from its description and
// schemas and its signature, such as
//
//	/**
//	 * Adds two numbers.
//	 * @param {object} args
//	 * @param {number} args.a - The first.
//	 * @param {number} [args.b=1]
//	 */
//	async function tools.memory.add(args)
//
// Tools are sorted by server and name. A name that is not a JavaScript
// identifier is written as tools["my-server"]["my-tool"], which is how the
// script calls it.
func ListTools(tools []Tool) string {
	sorted := slices.Clone(tools)
	slices.SortStableFunc(sorted, func(a, b Tool) int {
		return cmp.Or(cmp.Compare(a.Server, b.Server), cmp.Compare(a.Name, b.Name))
	})
	sorted = slices.CompactFunc(sorted, func(a, b Tool) bool { return a.Server == b.Server && a.Name == b.Name })

	var b strings.Builder
	b.WriteString(listingHeader)
	if len(sorted) == 0 {
		b.WriteString("\n// No MCP tools are available.\n")
	}
	for _, t := range sorted {
		b.WriteString("\n")
		writeTool(&b, t)
	}
	return b.String()
}

func writeTool(b *strings.Builder, t Tool) {
	var lines []string
	if desc := strings.TrimSpace(t.Description); desc != "" {
		for _, l := range strings.Split(desc, "\n") {
			lines = append(lines, strings.TrimRight(l, " \t\r"))
		}
	}
	in := parseSchema(t.InputSchema)
	lines = append(lines, typer{root: in}.params(in)...)
	if len(t.OutputSchema) > 0 {
		out := parseSchema(t.OutputSchema)
		lines = append(lines, "@returns {Promise<"+typer{root: out}.jsType(out, 0)+">}")
	}
	b.WriteString("/**\n")
	for _, l := range lines {
		// A */ anywhere in the text would end the comment early.
		b.WriteString(strings.TrimRight(" * "+strings.ReplaceAll(l, "*/", `*\/`), " "))
		b.WriteString("\n")
	}
	b.WriteString(" */\nasync function ")
	b.WriteString(accessor(t.Server, t.Name))
	b.WriteString("(args)\n")
}

// params is the @param lines for a tool's args.
func (t typer) params(s *schema) []string {
	r := t.resolve(s, 0)
	if !isObject(r) {
		return []string{"@param {" + t.jsType(s, 0) + "} args"}
	}
	if len(r.Properties) == 0 {
		return []string{"@param {" + t.jsType(r, 0) + "} [args]"}
	}
	name := "args"
	if len(r.Required) == 0 {
		// The tool function passes {} for a missing argument.
		name = "[args]"
	}
	return append([]string{"@param {object} " + name}, t.propertyParams("args", r, 1)...)
}

// propertyParams writes one @param per property of s, nesting into plain
// objects and arrays of them.
func (t typer) propertyParams(path string, s *schema, depth int) []string {
	required := requiredSet(s)
	var lines []string
	for _, p := range s.Properties {
		ps := t.resolve(p.schema, depth)
		name := path + member(p.name)
		typ, nested := t.jsType(p.schema, depth), (*schema)(nil)
		if depth < maxNestedParams && isObject(ps) && len(ps.Properties) > 0 && !ps.Nullable {
			typ, nested = "object", ps
		} else if item := t.arrayItem(ps, depth); depth < maxNestedParams && item != nil {
			typ, nested, name = "object[]", item, name+"[]"
		}
		field := strings.TrimSuffix(name, "[]")
		if !required[p.name] {
			if def := literal(ps.Default); len(ps.Default) > 0 && def != "any" && len(def) <= maxDefault {
				field += "=" + def
			}
			field = "[" + field + "]"
		}
		line := "@param {" + typ + "} " + field
		desc := p.schema.Description
		if desc == "" {
			desc = ps.Description
		}
		if ps.Format != "" {
			desc = strings.TrimSpace(desc + " (" + ps.Format + ")")
		}
		if desc = strings.Join(strings.Fields(desc), " "); desc != "" {
			line += " - " + desc
		}
		lines = append(lines, line)
		if nested != nil {
			lines = append(lines, t.propertyParams(name, nested, depth+1)...)
		}
	}
	return lines
}

// arrayItem is the item schema of an array of plain objects with
// properties, or nil.
func (t typer) arrayItem(s *schema, depth int) *schema {
	if s == nil || s.Nullable || len(s.Items) == 0 || !slices.Equal(s.Type, typeNames{"array"}) {
		return nil
	}
	item := t.resolve(parseSchema(s.Items), depth)
	if !isObject(item) || len(item.Properties) == 0 || item.Nullable {
		return nil
	}
	return item
}

// isObject reports whether s describes only objects.
func isObject(s *schema) bool {
	if s == nil || s.always || s.never || len(s.AnyOf)+len(s.OneOf)+len(s.AllOf) > 0 || len(s.Enum) > 0 || len(s.Const) > 0 {
		return false
	}
	if len(s.Type) == 0 {
		return len(s.Properties) > 0
	}
	return slices.Equal(s.Type, typeNames{"object"})
}

// accessor is how a script reaches a tool: tools.server.tool, with
// brackets for names that are not identifiers.
func accessor(server, tool string) string {
	return "tools" + member(server) + member(tool)
}

// member is .name, or ["name"] when name is not an identifier.
func member(name string) string {
	if isIdentifier(name) {
		return "." + name
	}
	return "[" + quote(name) + "]"
}

// propertyName is name as a key in an object type.
func propertyName(name string) string {
	if isIdentifier(name) {
		return name
	}
	return quote(name)
}

// isIdentifier reports whether name can follow a dot. Reserved words can
// (tools.delete is fine); non-ASCII letters could too, but brackets are
// always right.
func isIdentifier(name string) bool {
	if name == "" {
		return false
	}
	for i, c := range name {
		switch {
		case c == '_' || c == '$' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// quote is name as a JavaScript string literal (JSON's are).
func quote(name string) string {
	s, _ := marshalNoHTML(name) // a string: cannot fail
	return s
}

func marshalNoHTML(v any) (string, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}
