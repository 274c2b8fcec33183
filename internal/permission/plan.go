package permission

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
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

// ParsePlan reads a request's permissions value. Absent or null is
// {default: allow_reads}. A value that is not an object, a default that is
// not one of the four permission values, or rules that are not an array
// make the whole plan {default: ask} with Malformed set: bad input fails
// toward asking a person, never toward allowing and never toward silently
// keeping half a policy. A rule that is not {pattern, permission} with a
// valid pattern and allow, ask or deny is dropped and listed in Dropped.
// Member names match case-insensitively, as everywhere in the request.
func ParsePlan(raw json.RawMessage) Plan {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return Plan{Default: AllowReads}
	}
	malformed := func(why string) Plan { return Plan{Default: Ask, Malformed: why} }
	if raw[0] != '{' {
		return malformed("permissions must be an object")
	}
	var wire struct {
		Default json.RawMessage `json:"default"`
		Rules   json.RawMessage `json:"rules"`
	}
	if err := json.Unmarshal(raw, &wire); err != nil {
		return malformed("permissions is not valid JSON")
	}
	plan := Plan{Default: AllowReads}
	if d := bytes.TrimSpace(wire.Default); len(d) > 0 && string(d) != "null" {
		var s string
		if json.Unmarshal(d, &s) != nil || !Permission(s).isDefault() {
			return malformed(fmt.Sprintf("permissions.default %s is not allow, ask, deny or allow_reads", clip(d)))
		}
		plan.Default = Permission(s)
	}
	rules := bytes.TrimSpace(wire.Rules)
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

func parseRule(raw json.RawMessage) (Rule, bool) {
	var wire struct {
		Pattern    *string `json:"pattern"`
		Permission *string `json:"permission"`
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' || json.Unmarshal(t, &wire) != nil {
		return Rule{}, false
	}
	if wire.Pattern == nil || wire.Permission == nil || !Permission(*wire.Permission).isTool() {
		return Rule{}, false
	}
	if _, ok := parsePattern(*wire.Pattern); !ok {
		return Rule{}, false
	}
	return Rule{Pattern: *wire.Pattern, Permission: Permission(*wire.Permission)}, true
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

func (p Plan) strongestRule(g Gate) (Permission, bool) {
	var best Permission
	for _, r := range p.Rules {
		if strength(r.Permission) > strength(best) && r.matches(g) {
			best = r.Permission
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

func (r Rule) matches(g Gate) bool {
	p, ok := parsePattern(r.Pattern)
	if !ok || builtinName(g.ToolName) != p.tool {
		return false
	}
	if !p.hasArg {
		return true
	}
	arg, ok := firstStringArgument(p.tool, g.Args)
	if !ok {
		return false // arguments that cannot be inspected do not match
	}
	if p.prefix {
		return strings.HasPrefix(arg, p.arg)
	}
	return arg == p.arg
}

// firstStringArgument is the argument a rule pattern is compared with. For
// Bash it is the command member, and only when that is a string. For any
// other tool it is the first string among the arguments in document order:
// the first string member of an object (skipping members of other types),
// the first string item of an array, or the arguments themselves when they
// are a string. Arguments sent as a string holding a JSON object or array
// are read as that value first, as a tool would read them.
func firstStringArgument(tool string, args json.RawMessage) (string, bool) {
	if len(bytes.TrimSpace(args)) == 0 {
		return "", false
	}
	v, err := parseJSON(string(args))
	if err != nil {
		return "", false
	}
	if v.kind == jsonString {
		if parsed, ok := parseJSONish(v.text); ok {
			v = parsed
		}
	}
	if tool == "Bash" {
		if command, ok := v.member("command"); ok && v.kind == jsonObject && command.kind == jsonString {
			return command.text, true
		}
		return "", false
	}
	switch v.kind {
	case jsonString:
		return v.text, true
	case jsonArray:
		for _, item := range v.items {
			if item.kind == jsonString {
				return item.text, true
			}
		}
	case jsonObject:
		for _, m := range v.members {
			if m.value.kind == jsonString {
				return m.value.text, true
			}
		}
	}
	return "", false
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

// Decide is Verdict with the stored decision taken from s (by toolCallID,
// then key; see Store.TakeDecision), and only when the effective
// permission is ask. It returns the decision it consumed, if any, so a
// denial can carry the person's reason. s may be nil.
func (p Plan) Decide(g Gate, s *Store, toolCallID, key string) (Verdict, *Decision) {
	if p.Effective(g) != Ask || s == nil {
		return p.Verdict(g, nil), nil
	}
	d, _ := s.TakeDecision(toolCallID, key)
	return p.Verdict(g, d), d
}
