package tools

import (
	"encoding/json"
	"testing"

	"github.com/runnel/runnel/internal/permission"
	"github.com/runnel/runnel/internal/strictjson"
)

// FuzzArgumentsReadOneWay is the differential target of the security
// review's first finding: for every arguments text the loop lets through
// (strictjson accepts it, it is an object, no name differs from bash's
// schema only in case), the argument a permission
// rule compares is the argument every executor acts on: the permission
// reader (permission.StringMember), the bash builtin's own decoding (its
// Subject), and encoding/json as a platform in Go would decode the
// forwarded arguments, into a struct (case-insensitive, last one wins)
// and into a map.
func FuzzArgumentsReadOneWay(f *testing.F) {
	for _, s := range []string{
		`{"command":"echo hello"}`,
		`{"command":"echo hello","COMMAND":"rm -rf /"}`,
		`{"command":"echo hello","command":"rm -rf /"}`,
		`{"Command":"rm -rf /"}`,
		`{"command":"echo \u0068i","comman\u0064":"x"}`,
		`{"cOmMaNd":"a","description":"b"}`,
		`{"command":"a","ſ":"b","s":"c"}`,
		`{"command":"\ud800"}`,
		`{"command":42}`,
		`{"command":"a","x":{"y":1,"Y":2}}`,
	} {
		f.Add([]byte(s))
	}
	e := newBuiltinEnv(f, nil)
	f.Fuzz(func(t *testing.T, args []byte) {
		// What the loop refuses to the model before any reader sees it:
		// arguments strictjson refuses, and names that differ from the
		// schema's only in case.
		if strictjson.Check(args) != nil || strictjson.CheckNames(args, []string{"command", "timeout_ms"}) != nil {
			return
		}
		var asMap map[string]json.RawMessage
		if json.Unmarshal(args, &asMap) != nil {
			return // not an object: refused to the model too
		}
		rule := permission.StringMember(args, "command")
		tool := e.tools["bash"].Subject(args)
		var platform struct {
			Command *string `json:"command"`
		}
		platformErr := json.Unmarshal(args, &platform)
		var mapped *string
		if raw, ok := asMap["command"]; ok {
			var s string
			if json.Unmarshal(raw, &s) == nil {
				mapped = &s
			}
		}
		if rule == nil {
			// No string command the rule could inspect: the tool must not
			// find one either, nor a platform decoder.
			if tool != nil && *tool != "" {
				t.Fatalf("%s: the rule sees no command, bash runs %q", args, *tool)
			}
			if platformErr == nil && platform.Command != nil {
				t.Fatalf("%s: the rule sees no command, a platform decodes %q", args, *platform.Command)
			}
			return
		}
		if tool == nil || *tool != *rule {
			t.Fatalf("%s: the rule sees %q, bash runs %v", args, *rule, tool)
		}
		if platformErr != nil || platform.Command == nil || *platform.Command != *rule {
			t.Fatalf("%s: the rule sees %q, a platform decodes %v (%v)", args, *rule, platform.Command, platformErr)
		}
		if mapped == nil || *mapped != *rule {
			t.Fatalf("%s: the rule sees %q, a map decodes %v", args, *rule, mapped)
		}
	})
}
