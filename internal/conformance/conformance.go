// Package conformance locates the golden files every runnel implementation
// must pass, kept in shared/conformance beside the repository (a clean clone
// of runnel has ../shared next to it, in CI as on a developer's machine).
//
//	raw, err := conformance.Read("agenta/permission_decisions.json")
package conformance

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Dir returns the shared/conformance directory beside the module root,
// found by walking up from the working directory to go.mod.
func Dir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			c := filepath.Join(dir, "..", "shared", "conformance")
			if _, err := os.Stat(c); err != nil {
				return "", fmt.Errorf("conformance files not found at %s: clone shared/ beside the repository: %w", c, err)
			}
			return c, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// Read returns the contents of a file under shared/conformance.
func Read(name string) ([]byte, error) {
	dir, err := Dir()
	if err != nil {
		return nil, err
	}
	return os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
}

// ShapeDiff says where got lacks the shape of want: a member of want that
// got does not have, or has with a value of another JSON kind, recursing
// into objects. A platform that parses want parses got when it says
// nothing.
func ShapeDiff(want, got map[string]any) []string {
	var out []string
	var walk func(path string, want, got map[string]any)
	walk = func(path string, want, got map[string]any) {
		for k, wv := range want {
			gv, ok := got[k]
			switch {
			case !ok:
				out = append(out, fmt.Sprintf("%s%s is missing", path, k))
			case kindOf(wv) != kindOf(gv):
				out = append(out, fmt.Sprintf("%s%s is a %s, the golden file has a %s", path, k, kindOf(gv), kindOf(wv)))
			default:
				if wm, ok := wv.(map[string]any); ok {
					walk(path+k+".", wm, gv.(map[string]any))
				}
			}
		}
	}
	walk("", want, got)
	return out
}

// kindOf names a decoded JSON value's kind.
func kindOf(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	}
	return "null"
}
