package conformance

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestShapeDiff(t *testing.T) {
	decode := func(s string) map[string]any {
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	want := decode(`{"ok":true,"usage":{"input":1,"output":2},"events":[],"error":null}`)
	if d := ShapeDiff(want, decode(`{"ok":false,"usage":{"input":5,"output":0,"total":5},"events":[{}],"error":null,"extra":1}`)); len(d) != 0 {
		t.Errorf("same shape: %q", d)
	}
	got := ShapeDiff(want, decode(`{"ok":"yes","usage":{"input":1},"error":null}`))
	slices.Sort(got)
	expected := []string{"events is missing", "ok is a string, the golden file has a boolean", "usage.output is missing"}
	if !slices.Equal(got, expected) {
		t.Errorf("ShapeDiff %q, want %q", got, expected)
	}
}
