package server

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/uistream"
)

// These tests keep openapi.json honest from the code's side: the document
// is well formed, describes every route New registers (found in the
// source, and checked live on the mux), and its schemas have exactly the
// fields of the Go types and the values of the Go constants they describe.
// cmd/runnel/openapi_test.go checks it against real recorded traffic.

const docURL = "https://runnel.invalid/openapi.json"

// openAPIDoc is the document decoded as the validator reads it.
func openAPIDoc(t *testing.T) map[string]any {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(openAPIDocument))
	if err != nil {
		t.Fatalf("openapi.json is not JSON: %v", err)
	}
	return doc.(map[string]any)
}

// compiler compiles the document's schemas with JSON Schema 2020-12.
func compiler(t *testing.T, doc map[string]any) *jsonschema.Compiler {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(docURL, doc); err != nil {
		t.Fatal(err)
	}
	return c
}

// resolve follows a local $ref ("#/components/…") to what it names.
func resolve(t *testing.T, doc map[string]any, ref string) any {
	t.Helper()
	v, err := pointer(doc, ref)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func pointer(doc map[string]any, ref string) (any, error) {
	p, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, fmt.Errorf("$ref %q is not local", ref)
	}
	var v any = doc
	for tok := range strings.SplitSeq(p, "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("$ref %q: %q is not in an object", ref, tok)
		}
		if v, ok = m[tok]; !ok {
			return nil, fmt.Errorf("$ref %q: no %q", ref, tok)
		}
	}
	return v, nil
}

// deref returns the object v is, following $ref.
func deref(t *testing.T, doc map[string]any, v any) map[string]any {
	t.Helper()
	m, _ := v.(map[string]any)
	for m != nil {
		ref, ok := m["$ref"].(string)
		if !ok {
			break
		}
		m, _ = resolve(t, doc, ref).(map[string]any)
	}
	return m
}

var operationMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// TestOpenAPIDocumentIsWellFormed checks what an OpenAPI 3.1 tool relies
// on: every $ref resolves, operations have unique ids and documented
// responses, security and tags are declared, path parameters are
// declared, and every schema is valid JSON Schema 2020-12 that compiles.
func TestOpenAPIDocumentIsWellFormed(t *testing.T) {
	doc := openAPIDoc(t)
	if doc["openapi"] != "3.1.0" || doc["jsonSchemaDialect"] != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("openapi %v, jsonSchemaDialect %v: want 3.1.0 and 2020-12", doc["openapi"], doc["jsonSchemaDialect"])
	}
	info, _ := doc["info"].(map[string]any)
	if info["title"] == nil || info["version"] != strconv.Itoa(Protocol) {
		t.Errorf("info %v: want a title, and the protocol version %d", info, Protocol)
	}

	// Every $ref, anywhere, resolves.
	var walk func(string, any)
	walk = func(at string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				if _, err := pointer(doc, ref); err != nil {
					t.Errorf("at %s: %v", at, err)
				}
			}
			for k, e := range v {
				walk(at+"/"+k, e)
			}
		case []any:
			for i, e := range v {
				walk(at+"/"+strconv.Itoa(i), e)
			}
		}
	}
	walk("#", doc)

	components, _ := doc["components"].(map[string]any)
	schemes, _ := components["securitySchemes"].(map[string]any)
	checkSecurity := func(at string, v any) {
		reqs, ok := v.([]any)
		if !ok {
			t.Errorf("%s: security is not an array", at)
		}
		for _, r := range reqs {
			for name := range r.(map[string]any) {
				if schemes[name] == nil {
					t.Errorf("%s: security scheme %q is not declared", at, name)
				}
			}
		}
	}
	checkSecurity("#/security", doc["security"])
	tags := map[string]bool{}
	docTags, _ := doc["tags"].([]any)
	for _, tag := range docTags {
		tags[tag.(map[string]any)["name"].(string)] = true
	}

	ids := map[string]string{}
	statusKey := regexp.MustCompile(`^([1-5][0-9][0-9]|[1-5]XX|default)$`)
	paths, _ := doc["paths"].(map[string]any)
	if len(paths) == 0 {
		t.Fatal("no paths")
	}
	for path, item := range paths {
		if !strings.HasPrefix(path, "/") {
			t.Errorf("path %q does not start with /", path)
		}
		for key := range item.(map[string]any) {
			if !slices.Contains(operationMethods, key) && !slices.Contains([]string{"summary", "description", "parameters", "servers", "$ref"}, key) {
				t.Errorf("path %s: %q is not a field of a path item", path, key)
			}
		}
		for _, method := range operationMethods {
			op, ok := item.(map[string]any)[method].(map[string]any)
			if !ok {
				continue
			}
			at := method + " " + path
			id, _ := op["operationId"].(string)
			if id == "" || ids[id] != "" {
				t.Errorf("%s: operationId %q is missing or also %s's", at, id, ids[id])
			}
			ids[id] = at
			opTags, _ := op["tags"].([]any)
			for _, tag := range opTags {
				if !tags[tag.(string)] {
					t.Errorf("%s: tag %q is not declared", at, tag)
				}
			}
			if sec, ok := op["security"]; ok {
				checkSecurity(at, sec)
			}
			declared := map[string]bool{}
			params, _ := op["parameters"].([]any)
			for _, p := range params {
				p := deref(t, doc, p)
				if p["name"] == nil || !slices.Contains([]any{"query", "header", "path", "cookie"}, p["in"]) || p["schema"] == nil {
					t.Errorf("%s: parameter %v needs a name, a place and a schema", at, p)
				}
				if p["in"] == "path" {
					declared[p["name"].(string)] = p["required"] == true
				}
			}
			for _, m := range regexp.MustCompile(`\{([^}]+)\}`).FindAllStringSubmatch(path, -1) {
				if !declared[m[1]] {
					t.Errorf("%s: path parameter %q is not declared as required", at, m[1])
				}
			}
			if rb, ok := op["requestBody"]; ok {
				checkContent(t, doc, at+" request", deref(t, doc, rb)["content"])
			}
			responses, _ := op["responses"].(map[string]any)
			if len(responses) == 0 {
				t.Errorf("%s: no responses", at)
			}
			for status, r := range responses {
				if !statusKey.MatchString(status) {
					t.Errorf("%s: response key %q is not a status", at, status)
				}
				r := deref(t, doc, r)
				if s, _ := r["description"].(string); s == "" {
					t.Errorf("%s %s: a response needs a description", at, status)
				}
				if c, ok := r["content"]; ok {
					checkContent(t, doc, at+" "+status, c)
				}
			}
		}
	}

	// Every schema is a valid 2020-12 schema, and compiles.
	c := compiler(t, doc)
	meta, err := c.Compile("https://json-schema.org/draft/2020-12/schema")
	if err != nil {
		t.Fatal(err)
	}
	schemas, _ := components["schemas"].(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(schemas)) {
		if err := meta.Validate(schemas[name]); err != nil {
			t.Errorf("schema %s is not valid JSON Schema 2020-12: %v", name, err)
		}
		if _, err := c.Compile(docURL + "#/components/schemas/" + name); err != nil {
			t.Errorf("schema %s: %v", name, err)
		}
	}
}

func checkContent(t *testing.T, doc map[string]any, at string, content any) {
	t.Helper()
	m, ok := content.(map[string]any)
	if !ok || len(m) == 0 {
		t.Errorf("%s: content has no media type", at)
	}
	for mt, media := range m {
		if _, ok := media.(map[string]any)["schema"]; !ok {
			t.Errorf("%s %s: no schema", at, mt)
		}
	}
}

// TestOpenAPIDescribesEveryRoute finds the routes New registers in this
// package's source (route(…) and mux.Handle(…) calls) and wants each
// described; and it asks the live mux for each described operation, which
// must reach a route of its own, not the catch-all 404.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	doc := openAPIDoc(t)
	paths := doc["paths"].(map[string]any)
	described := func(method, path string) bool {
		item, _ := paths[path].(map[string]any)
		return item[strings.ToLower(method)] != nil
	}

	routes := registeredRoutes(t)
	if len(routes) < 5 {
		t.Fatalf("found only %v in the source: has the way routes are registered changed?", routes)
	}
	for _, r := range routes {
		method, path, _ := strings.Cut(r, " ")
		path = strings.TrimSuffix(path, "{$}") // "GET /{$}" is the root alone
		if !described(method, path) {
			t.Errorf("New serves %s, which openapi.json does not describe", r)
		}
	}

	srv := New(helloRunner(), &Options{Token: "tok"})
	for path, item := range paths {
		for method, op := range item.(map[string]any) {
			if !slices.Contains(operationMethods, method) {
				continue
			}
			if _, conditional := op.(map[string]any)["x-runnel-only-with"]; conditional {
				continue // served only with an option New was not given here
			}
			r := httptest.NewRequest(strings.ToUpper(method), regexp.MustCompile(`\{[^}]+\}`).ReplaceAllString(path, "x"), nil)
			if _, pattern := srv.mux.Handler(r); pattern != strings.ToUpper(method)+" "+path {
				t.Errorf("openapi.json describes %s %s, but the mux routes it to %q", strings.ToUpper(method), path, pattern)
			}
		}
	}
}

// registeredRoutes returns "METHOD /path" for every s.route(http.MethodX,
// "/path", …) and s.mux.Handle("METHOD /path", …) in the package's source.
func registeredRoutes(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var routes []string
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || len(call.Args) < 2 {
				return true
			}
			switch sel.Sel.Name {
			case "route":
				m, mok := call.Args[0].(*ast.SelectorExpr)
				p, pok := stringLit(call.Args[1])
				if mok && pok && strings.HasPrefix(m.Sel.Name, "Method") {
					routes = append(routes, strings.ToUpper(strings.TrimPrefix(m.Sel.Name, "Method"))+" "+p)
				}
			case "Handle", "HandleFunc":
				if x, ok := sel.X.(*ast.SelectorExpr); !ok || x.Sel.Name != "mux" {
					return true
				}
				if p, ok := stringLit(call.Args[0]); ok && strings.Contains(p, " ") {
					routes = append(routes, p)
				}
			}
			return true
		})
	}
	return routes
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// TestOpenAPISchemasMatchTheTypes compares each described object with the
// Go type behind it: the same member names both ways (a field added to
// the type, or one renamed in the document, fails), and for what runnel
// writes, required exactly when the field is always written (no
// omitempty).
func TestOpenAPISchemasMatchTheTypes(t *testing.T) {
	doc := openAPIDoc(t)
	tests := []struct {
		typ    reflect.Type
		schema string
		output bool     // runnel writes it: check required
		extra  []string // members read besides the fields (aliases)
	}{
		{reflect.TypeFor[runnel.RunRequest](), "RunRequest", false, nil},
		{reflect.TypeFor[runnel.Endpoint](), "Endpoint", false, nil},
		{reflect.TypeFor[runnel.ModelConnection](), "ModelConnection", false, nil},
		{reflect.TypeFor[runnel.Credential](), "Credential", false, nil},
		{reflect.TypeFor[runnel.ModelCapabilities](), "ModelCapabilities", false, nil},
		{reflect.TypeFor[runnel.Message](), "Message", false, nil},
		{reflect.TypeFor[runnel.Block](), "Block", false, nil},
		{reflect.TypeFor[runnel.ToolSpec](), "ToolSpec", false, []string{"input_schema"}},
		{reflect.TypeFor[runnel.DirectCall](), "DirectCall", false, []string{"args_into"}},
		{reflect.TypeFor[runnel.McpServer](), "McpServer", false, nil},
		{reflect.TypeFor[runnel.McpConnection](), "McpConnection", false, nil},
		{reflect.TypeFor[runnel.McpPolicy](), "McpPolicy", false, nil},
		{reflect.TypeFor[runnel.ToolCallback](), "ToolCallback", false, nil},
		{reflect.TypeFor[runnel.SandboxPermission](), "SandboxPermission", false, nil},
		{reflect.TypeFor[runnel.File](), "File", false, nil},
		{reflect.TypeFor[runnel.Skill](), "Skill", false, nil},
		{reflect.TypeFor[runnel.CodeMode](), "CodeMode", false, nil},
		{reflect.TypeFor[runnel.Limits](), "RunLimits", false, nil},
		{reflect.TypeFor[runnel.TraceContext](), "TraceContext", false, nil},
		{reflect.TypeFor[runnel.Result](), "Result", true, nil},
		{reflect.TypeFor[runnel.Message](), "ResultMessage", true, nil},
		{reflect.TypeFor[runnel.Usage](), "Usage", true, nil},
		{reflect.TypeFor[runnel.Interaction](), "Interaction", true, nil},
		{reflect.TypeFor[runnel.InteractionToolCall](), "InteractionToolCall", true, nil},
		{reflect.TypeFor[runnel.Capabilities](), "HarnessCapabilities", true, nil},
		{reflect.TypeFor[Capabilities](), "Capabilities", true, nil},
		{reflect.TypeFor[Limits](), "ServerLimits", true, nil},
		{reflect.TypeFor[SandboxInfo](), "SandboxInfo", true, nil},
		{reflect.TypeFor[LimitInfo](), "LimitInfo", true, nil},
		{reflect.TypeFor[AgentInfo](), "AgentInfo", true, nil},
		{reflect.TypeFor[Profile](), "Profile", true, nil},
		// The chat's types; a union's members are those of its variants.
		{reflect.TypeFor[uistream.ChatRequest](), "ChatRequest", false, nil},
		{reflect.TypeFor[uistream.UIMessage](), "UIMessage", false, nil},
		{reflect.TypeFor[uistream.UIPart](), "UIPart", false, []string{"sourceId", "title"}},
		{reflect.TypeFor[uistream.Chunk](), "UIMessageChunk", false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.schema, func(t *testing.T) {
			s := resolve(t, doc, "#/components/schemas/"+tt.schema).(map[string]any)
			compareMembers(t, doc, tt.typ, s, tt.schema, tt.output, tt.extra)
		})
	}
}

// compareMembers compares t's JSON fields with the schema's properties,
// and recurses into properties described in place (not by $ref).
func compareMembers(t *testing.T, doc map[string]any, typ reflect.Type, schema map[string]any, at string, output bool, extra []string) {
	t.Helper()
	props, required := members(t, doc, schema)
	fields := jsonFields(typ)
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		f := fields[name]
		p, ok := props[name]
		if !ok {
			t.Errorf("%s: %s has the field %q, which openapi.json does not describe", at, typ, name)
			continue
		}
		if output {
			omit := strings.Contains(f.Tag.Get("json"), ",omitempty")
			if required[name] == omit {
				t.Errorf("%s.%s: omitempty %v, but required %v: describe whether runnel always writes it", at, name, omit, required[name])
			}
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice || ft.Kind() == reflect.Map {
			ft = ft.Elem()
		}
		pm, _ := p.(map[string]any)
		if items, ok := pm["items"].(map[string]any); ok {
			pm = items
		}
		if _, named := pm["$ref"]; !named && ft.Kind() == reflect.Struct && pm["properties"] != nil {
			compareMembers(t, doc, ft, pm, at+"."+name, output, nil)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(props)) {
		if _, ok := fields[name]; !ok && !slices.Contains(extra, name) {
			t.Errorf("%s: openapi.json describes %q, which %s does not have", at, name, typ)
		}
	}
}

// members returns a schema's properties and required names, through allOf
// and $ref, and for a oneOf the properties of all its variants.
func members(t *testing.T, doc map[string]any, schema map[string]any) (props map[string]any, required map[string]bool) {
	t.Helper()
	props, required = map[string]any{}, map[string]bool{}
	var add func(map[string]any)
	add = func(s map[string]any) {
		s = deref(t, doc, s)
		all, _ := s["allOf"].([]any)
		variants, _ := s["oneOf"].([]any)
		for _, sub := range append(all, variants...) {
			add(sub.(map[string]any))
		}
		p, _ := s["properties"].(map[string]any)
		maps.Copy(props, p)
		req, _ := s["required"].([]any)
		for _, r := range req {
			required[r.(string)] = true
		}
	}
	if ref, ok := schema["$ref"].(string); ok && schema["properties"] == nil {
		schema = deref(t, doc, map[string]any{"$ref": ref})
	}
	add(schema)
	return props, required
}

// jsonFields are the members encoding/json writes for t, embedded
// structs' included.
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		switch {
		case tag == "-" || !f.IsExported():
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			maps.Copy(out, jsonFields(f.Type))
		case name == "":
			out[f.Name] = f
		default:
			out[name] = f
		}
	}
	return out
}

// TestOpenAPIEnumsMatchTheConstants compares each enumeration of the
// document with the constants of the Go type it lists.
func TestOpenAPIEnumsMatchTheConstants(t *testing.T) {
	doc := openAPIDoc(t)
	enum := func(ref string) []string {
		var out []string
		for _, v := range resolve(t, doc, ref).([]any) {
			out = append(out, v.(string))
		}
		return out
	}
	root := constants(t, "../..")
	here := constants(t, ".")
	tests := []struct {
		name   string
		consts []string
		enum   []string
	}{
		{"error codes", append(root["ErrorCode"], here["runnel.ErrorCode"]...), enum("#/components/schemas/ErrorCode/enum")},
		{"run statuses", root["Status"], enum("#/components/schemas/RunStatus/enum")},
		{"interaction kinds", root["InteractionKind"], enum("#/components/schemas/InteractionKind/enum")},
		{"block types", root["BlockType"], enum("#/components/schemas/Block/properties/type/enum")},
		{"roles", root["Role"], enum("#/components/schemas/Message/properties/role/enum")},
		{"tool kinds", root["ToolKind"], enum("#/components/schemas/ToolSpec/properties/kind/enum")},
		{"event types", root["EventType"], slices.Collect(maps.Keys(resolve(t, doc, "#/components/schemas/Event/discriminator/mapping").(map[string]any)))},
	}
	for _, tt := range tests {
		slices.Sort(tt.consts)
		slices.Sort(tt.enum)
		if len(tt.consts) == 0 || !slices.Equal(tt.consts, tt.enum) {
			t.Errorf("%s: the code has %q, openapi.json %q", tt.name, tt.consts, tt.enum)
		}
	}
}

// constants returns the string constants of the package in dir by the
// name of their declared type.
func constants(t *testing.T, dir string) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				typ := typeName(vs.Type)
				for i := range vs.Values {
					if s, ok := stringLit(vs.Values[i]); ok && typ != "" {
						out[typ] = append(out[typ], s)
					}
				}
			}
		}
	}
	return out
}

func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok {
			return x.Name + "." + e.Sel.Name
		}
	}
	return ""
}

// TestOpenAPIEventsHaveExactKeys writes an event of every type with every
// field set and wants its variant to have exactly the keys written.
func TestOpenAPIEventsHaveExactKeys(t *testing.T) {
	doc := openAPIDoc(t)
	c := compiler(t, doc)
	eventSchema, err := c.Compile(docURL + "#/components/schemas/Record")
	if err != nil {
		t.Fatal(err)
	}
	input := json.RawMessage(`{"a":1}`)
	full := runnel.Event{ID: "id1", Delta: "d", Text: "t", Name: "n", Input: input, Render: json.RawMessage(`{"kind":"connect"}`),
		Output: json.RawMessage(`"out"`), IsError: true, Denied: true,
		Interaction: &runnel.Interaction{ID: "i1", Kind: runnel.InteractionApproval, ToolCallID: "c1", ToolName: "n", Input: input,
			Options: []string{"approve", "deny"}, Render: json.RawMessage(`{}`), Signature: "sig",
			ToolCall: &runnel.InteractionToolCall{ToolCallID: "c1", Title: "n", RawInput: input, ResolvedName: "n"}},
		Answer:  &runnel.InteractionAnswer{ID: "i1", Kind: runnel.InteractionApproval, ToolCallID: "c1", Approved: true, Reason: "ok"},
		Usage:   &runnel.Usage{Input: 1, Output: 2, Total: 3, Cost: 0.5},
		Message: "m", Code: runnel.CodeRefused, StopReason: runnel.StopEndTurn, TraceID: "tr"}
	mapping := resolve(t, doc, "#/components/schemas/Event/discriminator/mapping").(map[string]any)
	for _, typ := range constants(t, "../..")["EventType"] {
		e := full
		e.Type = runnel.EventType(typ)
		line, err := json.Marshal(Record{Kind: RecordEvent, Event: &e})
		if err != nil {
			t.Errorf("%s: %v", typ, err)
			continue
		}
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(line)))
		if err != nil {
			t.Fatal(err)
		}
		if err := eventSchema.Validate(v); err != nil {
			t.Errorf("%s: %s does not match openapi.json: %v", typ, line, err)
		}
		ref, _ := mapping[typ].(string)
		if ref == "" {
			continue // reported by TestOpenAPIEnumsMatchTheConstants
		}
		allWritten(t, doc, typ, deref(t, doc, map[string]any{"$ref": ref}), v.(map[string]any)["event"])
	}
}

// allWritten wants every property of schema present in v, in nested
// objects described in place too: a property runnel never writes is a
// mistake in the document.
func allWritten(t *testing.T, doc map[string]any, at string, schema map[string]any, v any) {
	t.Helper()
	obj, ok := v.(map[string]any)
	if !ok {
		return
	}
	props, _ := schema["properties"].(map[string]any)
	for name, p := range props {
		got, ok := obj[name]
		if !ok {
			t.Errorf("%s: openapi.json describes %q, which runnel does not write", at, name)
			continue
		}
		if pm, ok := p.(map[string]any); ok && pm["properties"] != nil {
			allWritten(t, doc, at+"."+name, pm, got)
		}
	}
}

// TestServeOpenAPI serves the document without a token: it holds no
// secret, and a client generator reads it first.
func TestServeOpenAPI(t *testing.T) {
	ts := newTestServer(t, helloRunner(), &Options{Token: "s3cret-token"})
	resp, body := do(t, ts, http.MethodGet, "/openapi.json", "")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var got, want any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(openAPIDocument), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Error("GET /openapi.json is not openapi.json")
	}
	if resp, _ := do(t, ts, http.MethodPost, "/openapi.json", ""); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /openapi.json: %d, want 405", resp.StatusCode)
	}
}
