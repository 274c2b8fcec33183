package runnel_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel"
)

// messageByParts is how a Message was decoded before the one-pass reader:
// the message, then its content, then each block, each from its own copy
// of the bytes. It is the reference the one-pass reader must agree with.
func messageByParts(data []byte) (runnel.Message, error) {
	var m runnel.Message
	var raw struct {
		Role    runnel.Role     `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := jsonv2.Unmarshal(data, &raw); err != nil {
		return m, err
	}
	m.Role = raw.Role
	c := bytes.TrimSpace(raw.Content)
	switch {
	case len(c) == 0 || bytes.Equal(c, []byte("null")):
	case c[0] == '"':
		var s string
		if err := jsonv2.Unmarshal(c, &s); err != nil {
			return m, err
		}
		m.Content = []runnel.Block{{Type: runnel.BlockText, Text: s}}
	case c[0] == '[':
		var items []json.RawMessage
		if err := jsonv2.Unmarshal(c, &items); err != nil {
			return m, err
		}
		for _, it := range items {
			var b runnel.Block
			if len(it) > 0 && it[0] == '"' {
				if err := jsonv2.Unmarshal(it, &b.Text); err != nil {
					return m, err
				}
				b.Type = runnel.BlockText
			} else if err := jsonv2.Unmarshal(it, &b); err != nil {
				return m, err
			}
			m.Content = append(m.Content, b)
		}
	default:
		return m, fmt.Errorf("message content must be a string or an array of blocks")
	}
	return m, nil
}

// FuzzMessageDecodeAgrees: reading a message in one pass accepts exactly
// what reading it in parts accepted, and reads the same message.
func FuzzMessageDecodeAgrees(f *testing.F) {
	for _, s := range []string{`{"role":"user","content":"hi"}`, `{"role":"user","content":["a",{"type":"text","text":"b"}]}`,
		`{"role":"tool","content":[{"type":"tool_result","toolCallId":"c","output":{"a":[1,"x"]}}]}`, `null`, `"x"`, `[1]`,
		`{"content":null}`, `{"content":[]}`, `{"content":42}`, `{"content":[null,5]}`, `{"role":"a","role":"b"}`,
		`{"content":"a","x":{"y":[1,{"z":null}]}}`, `{"content":[{"type":"text","text":"\ud800"}]}`, `{"content":[{"size":1.5}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want, wantErr := messageByParts(data)
		var got runnel.Message
		gotErr := jsonv2.Unmarshal(data, &got)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("%q: one pass says %v, by parts %v", data, gotErr, wantErr)
		}
		if gotErr == nil {
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("%q: one pass read another message (-by parts +one pass):\n%s", data, diff)
			}
		}
	})
}
