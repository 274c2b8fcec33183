package permission

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/runnel/runnel/internal/strictjson"
)

// Permission is a permission value: what a spec, a server or a rule says
// about a tool, or a plan's default.
type Permission string

// The permission values. AllowReads is a plan default (and is accepted
// from a spec or a server): allow read-only tools, ask for the rest.
const (
	Allow      Permission = "allow"
	Ask        Permission = "ask"
	Deny       Permission = "deny"
	AllowReads Permission = "allow_reads"
)

// Rule is one permission rule in Claude settings syntax: Pattern "Bash"
// matches the tool by name, "Bash(npm run:*)" matches when the first
// string argument starts with "npm run", "Bash(ls)" when it is exactly "ls".
// Permission is Allow, Ask or Deny. A rule whose pattern does not parse
// matches nothing (ParsePlan drops such rules).
type Rule struct {
	Pattern    string
	Permission Permission
}

// pattern is a parsed Rule.Pattern.
type pattern struct {
	tool   string // canonical tool name
	arg    string // the argument pattern, without ":*"
	hasArg bool
	prefix bool
}

// Plan is a run's permission plan (DESIGN §5.1). The zero Plan is the plan
// of a request without permissions: default allow_reads, no rules.
type Plan struct {
	Default Permission
	Rules   []Rule
	// Dropped holds each malformed rule that was dropped, as compact JSON
	// (cut to 200 bytes), for a notice to the caller.
	Dropped []string
	// Malformed says why the permissions value as a whole was not
	// understood; the plan then asks for everything. Empty when it parsed.
	Malformed string
}

// Open reports whether the plan lets every call run without asking
// anyone: default allow, read whole, and no rule that asks or denies. Only
// then may an agent run in a mode that skips the gate, since the gate
// would allow everything it skipped.
func (p Plan) Open() bool {
	if p.Default != Allow || p.Malformed != "" || len(p.Dropped) > 0 {
		return false
	}
	for _, r := range p.Rules {
		if r.Permission != Allow {
			return false
		}
	}
	return true
}

// ParsePlan reads a request's permissions value. Absent or null is
// {default: allow_reads}. A value that is not an object, a default that is
// not one of the four permission values, or rules that are not an array
// make the whole plan {default: ask} with Malformed set: bad input fails
// toward asking a person, never toward allowing and never toward silently
// keeping half a policy. A rule that is not {pattern, permission} with a
// valid pattern and allow, ask or deny is dropped and listed in Dropped.
//
// Member names match exactly and are read strictly (internal/strictjson):
// a member given twice, or a name that differs from "default", "rules",
// "pattern" or "permission" only in case ("DEFAULT"), is malformed rather
// than read one way here and another by a validator in front of runnel.
// Other unknown members are ignored.
func ParsePlan(raw json.RawMessage) Plan {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return Plan{Default: AllowReads}
	}
	malformed := func(why string) Plan { return Plan{Default: Ask, Malformed: why} }
	if raw[0] != '{' {
		return malformed("permissions must be an object")
	}
	members, why := readMembers(raw, "default", "rules")
	if why != "" {
		return malformed("permissions " + why)
	}
	plan := Plan{Default: AllowReads}
	if d := bytes.TrimSpace(members["default"]); len(d) > 0 && string(d) != "null" {
		var s string
		if json.Unmarshal(d, &s) != nil || !Permission(s).isDefault() {
			return malformed(fmt.Sprintf("permissions.default %s is not allow, ask, deny or allow_reads", clip(d)))
		}
		plan.Default = Permission(s)
	}
	rules := bytes.TrimSpace(members["rules"])
	if len(rules) == 0 || string(rules) == "null" {
		return plan
	}
	var items []json.RawMessage
	if rules[0] != '[' || json.Unmarshal(rules, &items) != nil {
		return malformed("permissions.rules must be an array")
	}
	for _, item := range items {
		if r, ok := parseRule(item); ok {
			plan.Rules = append(plan.Rules, r)
		} else {
			plan.Dropped = append(plan.Dropped, clip(item))
		}
	}
	return plan
}

// readMembers reads a JSON object strictly into its members by exact
// name. It says why not when raw is not such an object, or when a member
// name differs from one of known only in case.
func readMembers(raw json.RawMessage, known ...string) (map[string]json.RawMessage, string) {
	var members map[string]json.RawMessage
	if err := strictjson.Unmarshal(raw, &members); err != nil {
		return nil, fmt.Sprintf("is not valid JSON (it %s)", err)
	}
	if members == nil {
		return nil, "must be an object"
	}
	for name := range members {
		for _, k := range known {
			if name != k && strings.EqualFold(name, k) {
				return nil, fmt.Sprintf("has the member %q; member names are case-sensitive: write %q", name, k)
			}
		}
	}
	return members, ""
}

func parseRule(raw json.RawMessage) (Rule, bool) {
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return Rule{}, false
	}
	members, why := readMembers(raw, "pattern", "permission")
	if why != "" {
		return Rule{}, false
	}
	var pat, perm string
	if json.Unmarshal(members["pattern"], &pat) != nil || json.Unmarshal(members["permission"], &perm) != nil {
		return Rule{}, false
	}
	if !Permission(perm).isTool() {
		return Rule{}, false
	}
	if _, ok := parsePattern(pat); !ok {
		return Rule{}, false
	}
	return Rule{Pattern: pat, Permission: Permission(perm)}, true
}

// parsePattern reads "Name" or "Name(argument)" with an optional ":*"
// suffix on the argument. The name may not be empty or hold whitespace or
// parentheses; the argument may hold anything, parentheses included.
func parsePattern(s string) (pattern, bool) {
	name, arg, hasArg := strings.Cut(strings.TrimSpace(s), "(")
	if name == "" || strings.ContainsAny(name, " \t\r\n)") {
		return pattern{}, false
	}
	p := pattern{tool: builtinName(name)}
	if !hasArg {
		return p, true
	}
	arg, closed := strings.CutSuffix(arg, ")")
	if !closed {
		return pattern{}, false
	}
	p.hasArg = true
	p.arg, p.prefix = strings.CutSuffix(arg, ":*")
	if p.arg == "" && !p.prefix {
		return pattern{}, false // "Bash()" names no argument at all
	}
	return p, true
}

// clip is raw JSON compacted and cut short enough for a notice.
func clip(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		b.Reset()
		b.Write(raw)
	}
	const limit = 200
	if b.Len() <= limit {
		return b.String()
	}
	s := b.String()[:limit]
	return strings.ToValidUTF8(s, "") + "…"
}

func (p Permission) isTool() bool    { return p == Allow || p == Ask || p == Deny }
func (p Permission) isDefault() bool { return p.isTool() || p == AllowReads }

// Executor says who runs a gated tool. The decision is the same for every
// executor (see the package doc); the executor tells the caller what a
// verdict means: for a client tool, allow and pendingApproval both mean
// "serve the browser's stored output or pause for the browser".
type Executor string

// The executors of the golden permission cases.
const (
	ExecutorRelay   Executor = "relay"   // runnel runs it (callback, direct, builtin, MCP)
	ExecutorHarness Executor = "harness" // an external agent runs it and asks runnel first
	ExecutorClient  Executor = "client"  // the browser runs it
)

// Gate is one tool call waiting for a permission decision.
type Gate struct {
	Executor Executor
	// ToolName is the name rules match: the spec name for runnel's tools,
	// the recorded name for a harness's own tools. Builtin names match in
	// any case ("bash" matches the rule "Bash").
	ToolName string
	Args     json.RawMessage
	// Argument is what an argument rule ("Bash(npm run:*)") compares: the
	// one argument the tool designates, read as the tool itself reads it
	// (the command of Bash, the path of a file builtin, the first string
	// property a custom or MCP tool's schema declares; see
	// SchemaArgument). It is chosen by the tool, never by the model, and
	// nil when the call has no such argument that is a string.
	Argument *string
	// SpecPermission and ServerPermission are the spec's permission and the
	// owning MCP server's policy.permission, empty when unset.
	SpecPermission   string
	ServerPermission string
	// ReadOnly is the tool's read-only hint; nil is unknown, which
	// allow_reads treats as a write.
	ReadOnly *bool
}

// Effective returns the permission of a gate:
//
//	spec ?? server ?? strongest matching rule (deny > ask > allow) ?? default
//
// where the default allow_reads is allow for a gate whose ReadOnly is true
// and ask otherwise. A spec or server value that is not a permission value
// counts as ask.
func (p Plan) Effective(g Gate) Permission {
	for _, set := range []string{g.SpecPermission, g.ServerPermission} {
		if set != "" {
			return resolve(Permission(set), g.ReadOnly)
		}
	}
	if r, ok := p.strongestRule(g); ok {
		return r
	}
	if p.Default == "" {
		return resolve(AllowReads, g.ReadOnly)
	}
	return resolve(p.Default, g.ReadOnly)
}

// resolve turns a permission value into allow, ask or deny.
func resolve(p Permission, readOnly *bool) Permission {
	switch {
	case p.isTool():
		return p
	case p == AllowReads && readOnly != nil && *readOnly:
		return Allow
	default:
		return Ask // allow_reads for a write, or a value nobody defined
	}
}

// strongestRule is the strongest permission of the rules that match g. A
// rule with an argument that cannot inspect the call (Gate.Argument is
// nil) does not match, except that a deny rule then counts as ask: a
// rule meant to stop some arguments must not let through a call whose
// argument it cannot see.
func (p Plan) strongestRule(g Gate) (Permission, bool) {
	var best Permission
	for _, r := range p.Rules {
		perm := r.Permission
		switch r.match(g) {
		case noMatch:
			continue
		case uninspectable:
			if perm != Deny {
				continue
			}
			perm = Ask
		}
		if strength(perm) > strength(best) {
			best = perm
		}
	}
	return best, best != ""
}

// strength orders rule permissions: deny beats ask beats allow.
func strength(p Permission) int {
	switch p {
	case Allow:
		return 1
	case Ask:
		return 2
	case Deny:
		return 3
	}
	return 0
}

// ruleMatch is how a rule relates to a gate.
type ruleMatch int

const (
	noMatch ruleMatch = iota
	matches
	// uninspectable: the rule names the tool and an argument, and the
	// call has no argument to compare.
	uninspectable
)

func (r Rule) match(g Gate) ruleMatch {
	p, ok := parsePattern(r.Pattern)
	if !ok || builtinName(g.ToolName) != p.tool {
		return noMatch
	}
	switch {
	case !p.hasArg:
		return matches
	case g.Argument == nil:
		return uninspectable
	case p.prefix && strings.HasPrefix(*g.Argument, p.arg), !p.prefix && *g.Argument == p.arg:
		return matches
	case p.prefix && strings.HasSuffix(p.arg, "/") && *g.Argument == strings.TrimSuffix(p.arg, "/"):
		// A prefix that ends in a slash names a directory, and the
		// directory is in it: Write(secret/:*) covers a path argument
		// that resolves to secret itself ("secret/", "alias" linking to
		// it), which the file tools give as "secret".
		return matches
	}
	return noMatch
}

// StringMember returns the string member name of the JSON object args,
// matched exactly, or nil when args is not an object, has no such member,
// or its value is not a string. Arguments that passed
// internal/strictjson hold each name once, so this is the value any
// decoder reads.
func StringMember(args json.RawMessage, name string) *string {
	v, err := parseJSON(string(args))
	if err != nil || v.kind != jsonObject {
		return nil
	}
	m, ok := v.member(name)
	if !ok || m.kind != jsonString {
		return nil
	}
	return &m.text
}

// SchemaArgument is the argument rules inspect for a custom or MCP tool:
// the first property of the input schema's properties, in the order the
// schema declares them, whose type is "string" (or a type list holding
// "string"). Empty when there is none: argument rules then cannot inspect
// the tool's calls. The platform or server that declared the schema chose
// the order; the model never does.
func SchemaArgument(schema json.RawMessage) string {
	v, err := parseJSON(string(schema))
	if err != nil || v.kind != jsonObject {
		return ""
	}
	props, ok := v.member("properties")
	if !ok || props.kind != jsonObject {
		return ""
	}
	for _, m := range props.members {
		t, ok := m.value.member("type")
		switch {
		case !ok:
		case t.kind == jsonString && t.text == "string":
			return m.key
		case t.kind == jsonArray && slices.ContainsFunc(t.items, func(i jsonValue) bool { return i.kind == jsonString && i.text == "string" }):
			return m.key
		}
	}
	return ""
}

// Verdict is what happens to a gated call.
type Verdict string

// The verdicts, spelled as the golden cases spell them.
const (
	VerdictAllow   Verdict = "allow"
	VerdictDeny    Verdict = "deny"
	VerdictPending Verdict = "pendingApproval"
)

// Verdict decides a gate: deny and allow stand; ask is settled by the
// stored decision for this call when there is one, and pauses for a person
// when there is none. A stored decision only counts under ask, so a config
// changed to deny beats an old approval.
//
// The caller must take the stored decision only when the effective
// permission is ask, or an allow gate would consume it; Decide does that.
func (p Plan) Verdict(g Gate, stored *Decision) Verdict {
	switch p.Effective(g) {
	case Allow:
		return VerdictAllow
	case Deny:
		return VerdictDeny
	}
	switch {
	case stored == nil:
		return VerdictPending
	case stored.Approved:
		return VerdictAllow
	default:
		return VerdictDeny
	}
}

// Decide is Verdict with the stored decision taken from s for the call c
// (see Store.TakeDecision), and only when the effective permission is
// ask. It returns the decision it consumed, if any, so a denial can carry
// the person's reason. s may be nil.
func (p Plan) Decide(g Gate, s *Store, c CallRef) (Verdict, *Decision) {
	if p.Effective(g) != Ask || s == nil {
		return p.Verdict(g, nil), nil
	}
	d, _ := s.TakeDecision(c)
	return p.Verdict(g, d), d
}
