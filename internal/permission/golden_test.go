package permission

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel/internal/conformance"
)

// goldenCase is one case of agenta/permission_decisions.json, field for
// field: decoding refuses unknown fields, so a change in the file's format
// fails the test instead of being skipped silently.
type goldenCase struct {
	Name string `json:"name"`
	Gate struct {
		Executor         Executor        `json:"executor"`
		ToolName         string          `json:"toolName"`
		Args             json.RawMessage `json:"args"`
		SpecPermission   string          `json:"specPermission"`
		ServerPermission string          `json:"serverPermission"`
		ReadOnlyHint     *bool           `json:"readOnlyHint"`
	} `json:"gate"`
	Plan     json.RawMessage `json:"plan"`
	Stored   string          `json:"stored"`
	Python   bool            `json:"python"`
	Expected struct {
		Effective Permission `json:"effective"`
		Verdict   Verdict    `json:"verdict"`
	} `json:"expected"`
}

func TestGoldenPermissionDecisions(t *testing.T) {
	raw, err := conformance.Read("agenta/permission_decisions.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []goldenCase `json:"cases"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		t.Fatalf("decoding the golden file: %v", err)
	}
	if len(file.Cases) < 40 {
		t.Fatalf("golden file has %d cases, want at least 40", len(file.Cases))
	}
	for _, c := range file.Cases {
		t.Run(c.Name, func(t *testing.T) {
			switch c.Gate.Executor {
			case ExecutorRelay, ExecutorHarness, ExecutorClient:
			default:
				t.Fatalf("unknown executor %q", c.Gate.Executor)
			}
			plan := ParsePlan(c.Plan)
			if plan.Malformed != "" || len(plan.Dropped) > 0 {
				t.Fatalf("plan %s: malformed %q, dropped %q", c.Plan, plan.Malformed, plan.Dropped)
			}
			gate := Gate{
				Executor: c.Gate.Executor,
				ToolName: c.Gate.ToolName,
				Args:     c.Gate.Args,
				// The golden cases inspect only Bash, whose argument is
				// its command.
				Argument:         StringMember(c.Gate.Args, "command"),
				SpecPermission:   c.Gate.SpecPermission,
				ServerPermission: c.Gate.ServerPermission,
				ReadOnly:         c.Gate.ReadOnlyHint,
			}
			var stored *Decision
			switch c.Stored {
			case "":
			case "allow", "deny":
				stored = &Decision{Approved: c.Stored == "allow"}
			default:
				t.Fatalf("unknown stored decision %q", c.Stored)
			}
			type outcome struct {
				Effective Permission
				Verdict   Verdict
			}
			got := outcome{plan.Effective(gate), plan.Verdict(gate, stored)}
			want := outcome{c.Expected.Effective, c.Expected.Verdict}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}

			// Decide must agree with Verdict when the decision comes from
			// a store, and consume it only under ask.
			store := &Store{}
			call := CallRef{ID: "call_1", Key: "K"}
			if stored != nil {
				d := *stored
				d.Key = call.Key
				store.decisions.add(call.ID, call.Key, d)
			}
			verdict, _ := plan.Decide(gate, store, call)
			if verdict != c.Expected.Verdict {
				t.Errorf("Decide = %q, want %q", verdict, c.Expected.Verdict)
			}
			_, left := store.PeekDecision(call)
			if wantLeft := stored != nil && got.Effective != Ask; left != wantLeft {
				t.Errorf("stored decision left in the store = %v, want %v", left, wantLeft)
			}
		})
	}
}
