//go:build ignore

// openapi2jsonschema writes kubeconform's schema registry for one
// Kubernetes release from that release's OpenAPI v2 document
// (api/openapi-spec/swagger.json of the k8s.io/kubernetes module, which
// the Go module proxy serves), so deploy/helm-check.sh validates offline:
//
//	go run deploy/openapi2jsonschema.go swagger.json DIR
//
// writes DIR/<kind>[-<group>]-<version>.json for every kind, the names
// kubeconform looks up under -schema-location. Each file is standalone:
// the kind's schema plus every definition it references. It is strict,
// as kubectl's validation is: an object with properties accepts no other
// field. And it reads as the API server does: an int-or-string field takes
// either, a quantity takes a string or a number, and an optional field
// may be null (unset).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

type schema = map[string]any

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: go run deploy/openapi2jsonschema.go swagger.json DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "openapi2jsonschema:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	data, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var doc struct {
		Definitions map[string]schema `json:"definitions"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if len(doc.Definitions) == 0 {
		return fmt.Errorf("%s has no definitions", in)
	}
	defs := map[string]any{}
	for name, s := range doc.Definitions {
		defs[name] = convert(s)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	names := make([]string, 0, len(doc.Definitions))
	for name := range doc.Definitions {
		names = append(names, name)
	}
	slices.Sort(names)
	written := map[string]bool{}
	for _, name := range names {
		gvks, _ := doc.Definitions[name]["x-kubernetes-group-version-kind"].([]any)
		for _, g := range gvks {
			gvk, _ := g.(map[string]any)
			group, _ := gvk["group"].(string)
			version, _ := gvk["version"].(string)
			kind, _ := gvk["kind"].(string)
			file := fileName(group, version, kind)
			if kind == "" || version == "" || written[file] {
				continue // meta/v1 kinds (DeleteOptions, WatchEvent) name every group
			}
			written[file] = true
			s := schema{"$schema": "http://json-schema.org/draft-04/schema#"}
			for k, v := range defs[name].(schema) {
				s[k] = v
			}
			s["definitions"] = closure(defs, name)
			b, err := json.Marshal(s)
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(out, file), b, 0o644); err != nil {
				return err
			}
		}
	}
	if len(written) == 0 {
		return fmt.Errorf("%s defines no kinds", in)
	}
	fmt.Printf("openapi2jsonschema: %d schemas in %s\n", len(written), out)
	return nil
}

// fileName is kubeconform's {{.ResourceKind}}{{.KindSuffix}}.json: the
// kind in lower case, the group's first label, the version.
func fileName(group, version, kind string) string {
	name := strings.ToLower(kind)
	if group != "" {
		name += "-" + strings.ToLower(strings.Split(group, ".")[0])
	}
	return name + "-" + strings.ToLower(version) + ".json"
}

// closure is every definition reachable from name's references.
func closure(defs map[string]any, name string) map[string]any {
	out := map[string]any{}
	var visit func(v any)
	visit = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				target := strings.TrimPrefix(ref, "#/definitions/")
				if _, seen := out[target]; !seen {
					out[target] = defs[target]
					visit(defs[target])
				}
			}
			for _, x := range v {
				visit(x)
			}
		case []any:
			for _, x := range v {
				visit(x)
			}
		}
	}
	visit(defs[name])
	return out
}

// convert rewrites one OpenAPI schema as the API server reads it.
func convert(v any) any {
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = convert(x)
		}
		return out
	case map[string]any:
		if v["format"] == "int-or-string" || v["x-kubernetes-int-or-string"] == true {
			return schema{"oneOf": []any{schema{"type": "string"}, schema{"type": "integer"}}}
		}
		if ref, _ := v["$ref"].(string); ref == "#/definitions/io.k8s.apimachinery.pkg.api.resource.Quantity" {
			return quantity()
		}
		out := schema{}
		for k, x := range v {
			if k == "description" || k == "x-kubernetes-group-version-kind" {
				continue // size only; kubeconform picks the file by kind and version
			}
			out[k] = convert(x)
		}
		if props, ok := out["properties"].(schema); ok {
			if _, set := out["additionalProperties"]; !set && v["x-kubernetes-preserve-unknown-fields"] != true {
				out["additionalProperties"] = false
			}
			required, _ := v["required"].([]any)
			for name, p := range props {
				if !slices.Contains(required, any(name)) {
					props[name] = nullable(p)
				}
			}
		}
		return out
	}
	return v
}

func quantity() schema {
	return schema{"oneOf": []any{schema{"type": "string"}, schema{"type": "number"}}}
}

// nullable lets an optional field be null, which the API server reads as
// unset (Helm renders an empty value so).
func nullable(p any) any {
	s, ok := p.(schema)
	if !ok {
		return p
	}
	switch t := s["type"].(type) {
	case string:
		c := schema{}
		for k, v := range s {
			c[k] = v
		}
		c["type"] = []any{t, "null"}
		return c
	}
	if _, ok := s["$ref"]; ok {
		return schema{"anyOf": []any{s, schema{"type": "null"}}}
	}
	if alts, ok := s["oneOf"].([]any); ok {
		return schema{"oneOf": append(slices.Clone(alts), schema{"type": "null"})}
	}
	return s
}
