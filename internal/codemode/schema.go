package codemode

import (
	"bytes"
	"encoding/json"
	"errors"
	"sort"
	"strings"
)

// schema is the part of a JSON Schema that the listing turns into
// JavaScript types. Anything it does not understand becomes any.
type schema struct {
	// always and never are the boolean schemas true and false.
	always, never bool

	Type                 typeNames          `json:"type"`
	Description          string             `json:"description"`
	Properties           properties         `json:"properties"`
	Required             []string           `json:"required"`
	Items                json.RawMessage    `json:"items"`
	PrefixItems          []*schema          `json:"prefixItems"`
	AdditionalProperties *schema            `json:"additionalProperties"`
	Enum                 []json.RawMessage  `json:"enum"`
	Const                json.RawMessage    `json:"const"`
	AnyOf                []*schema          `json:"anyOf"`
	OneOf                []*schema          `json:"oneOf"`
	AllOf                []*schema          `json:"allOf"`
	Ref                  string             `json:"$ref"`
	Defs                 map[string]*schema `json:"$defs"`
	Definitions          map[string]*schema `json:"definitions"`
	Default              json.RawMessage    `json:"default"`
	Nullable             bool               `json:"nullable"`
	Format               string             `json:"format"`
}

func (s *schema) UnmarshalJSON(b []byte) error {
	switch string(bytes.TrimSpace(b)) {
	case "true":
		s.always = true
		return nil
	case "false":
		s.never = true
		return nil
	}
	type plain schema // without this method
	return json.Unmarshal(b, (*plain)(s))
}

// typeNames is "type", which is a name or a list of names.
type typeNames []string

func (t *typeNames) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		*t = typeNames{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*t = many
	return nil
}

// properties keeps the schema's order, which is the order its author chose
// and the one the model should read.
type properties []property

type property struct {
	name   string
	schema *schema
}

func (p *properties) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return errors.New("properties is not an object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := tok.(string)
		var s schema
		if err := dec.Decode(&s); err != nil {
			return err
		}
		*p = append(*p, property{name: name, schema: &s})
	}
	return nil
}

func parseSchema(raw json.RawMessage) *schema {
	var s schema
	if len(bytes.TrimSpace(raw)) == 0 || json.Unmarshal(raw, &s) != nil {
		return &schema{always: true}
	}
	return &s
}

// typer writes JavaScript (JSDoc, TypeScript-flavoured) types for the
// schemas of one tool, resolving local $refs against its root.
type typer struct {
	root *schema
}

// maxTypeDepth bounds nesting, which also ends recursive $refs.
const maxTypeDepth = 6

// maxEnum is the longest enum written out as literals; longer ones are
// written as their base type.
const maxEnum = 40

func (t typer) resolve(s *schema, depth int) *schema {
	for s != nil && s.Ref != "" && depth < maxTypeDepth {
		name, ok := strings.CutPrefix(s.Ref, "#/$defs/")
		defs := t.root.Defs
		if !ok {
			name, ok = strings.CutPrefix(s.Ref, "#/definitions/")
			defs = t.root.Definitions
		}
		next := defs[name]
		if !ok || next == nil {
			return &schema{always: true}
		}
		s = next
		depth++
	}
	return s
}

// jsType is s as an inline type.
func (t typer) jsType(s *schema, depth int) string {
	s = t.resolve(s, depth)
	switch {
	case s == nil || s.always || depth >= maxTypeDepth || s.Ref != "":
		return "any"
	case s.never:
		return "never"
	case len(s.Const) > 0:
		return t.nullable(s, literal(s.Const))
	case len(s.Enum) > 0 && len(s.Enum) <= maxEnum:
		lits := make([]string, len(s.Enum))
		for i, e := range s.Enum {
			lits[i] = literal(e)
		}
		return t.nullable(s, union(lits))
	case len(s.AnyOf) > 0 || len(s.OneOf) > 0:
		var members []string
		for _, m := range append(append([]*schema{}, s.AnyOf...), s.OneOf...) {
			members = append(members, t.jsType(m, depth+1))
		}
		return t.nullable(s, union(members))
	case len(s.AllOf) == 1:
		return t.jsType(s.AllOf[0], depth+1)
	case len(s.AllOf) > 1:
		var members []string
		for _, m := range s.AllOf {
			members = append(members, group(t.jsType(m, depth+1)))
		}
		return strings.Join(members, " & ")
	}
	types := s.Type
	if len(types) == 0 {
		switch {
		case len(s.Properties) > 0 || s.AdditionalProperties != nil:
			types = typeNames{"object"}
		case len(s.Items) > 0 || len(s.PrefixItems) > 0:
			types = typeNames{"array"}
		default:
			return "any"
		}
	}
	var members []string
	for _, name := range types {
		members = append(members, t.baseType(s, name, depth))
	}
	return t.nullable(s, union(members))
}

func (t typer) baseType(s *schema, name string, depth int) string {
	switch name {
	case "string", "boolean", "null":
		return name
	case "number", "integer":
		return "number"
	case "array":
		return t.arrayType(s, depth)
	case "object":
		return t.objectType(s, depth)
	}
	return "any"
}

func (t typer) arrayType(s *schema, depth int) string {
	if len(s.PrefixItems) > 0 {
		var items []string
		for _, it := range s.PrefixItems {
			items = append(items, t.jsType(it, depth+1))
		}
		return "[" + strings.Join(items, ", ") + "]"
	}
	item := &schema{always: true}
	if len(s.Items) > 0 {
		if bytes.HasPrefix(bytes.TrimSpace(s.Items), []byte("[")) {
			var tuple []*schema
			if json.Unmarshal(s.Items, &tuple) == nil {
				return t.arrayType(&schema{PrefixItems: tuple}, depth)
			}
		} else {
			item = parseSchema(s.Items)
		}
	}
	return group(t.jsType(item, depth+1)) + "[]"
}

func (t typer) objectType(s *schema, depth int) string {
	if len(s.Properties) == 0 {
		if extra := s.AdditionalProperties; extra != nil && !extra.never {
			return "{[key: string]: " + t.jsType(extra, depth+1) + "}"
		}
		return "object"
	}
	required := requiredSet(s)
	var fields []string
	for _, p := range s.Properties {
		opt := "?"
		if required[p.name] {
			opt = ""
		}
		fields = append(fields, propertyName(p.name)+opt+": "+t.jsType(p.schema, depth+1))
	}
	return "{" + strings.Join(fields, ", ") + "}"
}

func (t typer) nullable(s *schema, typ string) string {
	if s.Nullable && typ != "any" {
		return union([]string{typ, "null"})
	}
	return typ
}

func requiredSet(s *schema) map[string]bool {
	set := make(map[string]bool, len(s.Required))
	for _, name := range s.Required {
		set[name] = true
	}
	return set
}

// union joins types with |, without repeats, and any absorbs the rest.
func union(types []string) string {
	seen := make(map[string]bool, len(types))
	var out []string
	for _, typ := range types {
		if typ == "any" {
			return "any"
		}
		if !seen[typ] {
			seen[typ] = true
			out = append(out, typ)
		}
	}
	if len(out) == 0 {
		return "never"
	}
	if len(out) > 1 {
		sort.SliceStable(out, func(i, j int) bool { return out[i] != "null" && out[j] == "null" })
	}
	return strings.Join(out, "|")
}

// group parenthesises a union or intersection for use before [] or &.
func group(typ string) string {
	if topLevel(typ) {
		return "(" + typ + ")"
	}
	return typ
}

// topLevel reports whether typ has a | or & outside its braces and brackets.
func topLevel(typ string) bool {
	depth, inString := 0, false
	for i := 0; i < len(typ); i++ {
		c := typ[i]
		switch {
		case inString:
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[' || c == '(':
			depth++
		case c == '}' || c == ']' || c == ')':
			depth--
		case (c == '|' || c == '&') && depth == 0:
			return true
		}
	}
	return false
}

// literal is a JSON value as a JavaScript literal: JSON is one, and its
// strings are valid JavaScript strings.
func literal(raw json.RawMessage) string {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return "any"
	}
	return buf.String()
}
