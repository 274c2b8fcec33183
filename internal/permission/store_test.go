package permission

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel"
)

func user(text string) runnel.Message { return runnel.UserText(text) }

func assistant(blocks ...runnel.Block) runnel.Message {
	return runnel.Message{Role: runnel.RoleAssistant, Content: blocks}
}

func tool(blocks ...runnel.Block) runnel.Message {
	return runnel.Message{Role: runnel.RoleTool, Content: blocks}
}

// userBlocks is a user message carrying results and no text, as a
// platform sends approvals back.
func userBlocks(blocks ...runnel.Block) runnel.Message {
	return runnel.Message{Role: runnel.RoleUser, Content: blocks}
}

func callOf(id, name, input string) runnel.Block {
	return runnel.Block{Type: runnel.BlockToolCall, ToolCallID: id, ToolName: name, Input: json.RawMessage(input)}
}

func resultOf(id, kind, output string) runnel.Block {
	return runnel.Block{Type: runnel.BlockToolResult, ToolCallID: id, Kind: kind, Output: json.RawMessage(output)}
}

func TestExtractDecisions(t *testing.T) {
	lsKey := `Bash#{"command":"ls"}`
	tests := []struct {
		name     string
		messages []runnel.Message
		opts     ExtractOptions
		id, key  string
		want     *Decision // nil: nothing to take
	}{
		{
			name: "approval with kind",
			messages: []runnel.Message{user("list"), assistant(callOf("c1", "bash", `{"command":"ls","description":"list"}`)),
				userBlocks(resultOf("c1", "approval", `{"approved":true,"reason":"fine"}`))},
			id: "c1", key: lsKey,
			want: &Decision{ToolCallID: "c1", ToolName: "bash", Key: lsKey, Args: `{"command":"ls","description":"list"}`, Approved: true, Reason: "fine"},
		},
		{
			name: "approval by shape",
			messages: []runnel.Message{user("list"), assistant(callOf("c1", "bash", `{"command":"ls"}`)),
				tool(resultOf("c1", "", `{"approved":false,"reason":"not today"}`))},
			id: "other", key: lsKey,
			want: &Decision{ToolCallID: "c1", ToolName: "bash", Key: lsKey, Args: `{"command":"ls"}`, Reason: "not today"},
		},
		{
			name: "approval by shape inside a string output",
			messages: []runnel.Message{user("list"), assistant(callOf("c1", "bash", `{"command":"ls"}`)),
				tool(resultOf("c1", "", `"{\"approved\":true}"`))},
			id: "c1", key: lsKey,
			want: &Decision{ToolCallID: "c1", ToolName: "bash", Key: lsKey, Args: `{"command":"ls"}`, Approved: true},
		},
		{
			name: "a stray brace makes a string output no approval: a denial",
			messages: []runnel.Message{user("list"), assistant(callOf("c1", "bash", `{"command":"ls"}`)),
				tool(resultOf("c1", "approval", `"{\"approved\":true}}"`))},
			id: "c1", key: lsKey,
			want: &Decision{ToolCallID: "c1", ToolName: "bash", Key: lsKey, Args: `{"command":"ls"}`},
		},
		{
			name: "approved twice in different case is a denial",
			messages: []runnel.Message{user("list"), assistant(callOf("c1", "bash", `{"command":"ls"}`)),
				tool(resultOf("c1", "approval", `{"approved":true,"Approved":false}`))},
			id: "c1", key: lsKey,
			want: &Decision{ToolCallID: "c1", ToolName: "bash", Key: lsKey, Args: `{"command":"ls"}`},
		},
		{
			name: "approved twice in different case is no approval without kind",
			messages: []runnel.Message{user("list"), assistant(callOf("c1", "bash", `{"command":"ls"}`)),
				tool(resultOf("c1", "", `{"approved":true,"Approved":false}`))},
			id: "c1", key: lsKey,
		},
		{
			name: "a call that cannot be keyed takes no decision",
			messages: []runnel.Message{user("list"), assistant(callOf("c1", "bash", `{"command":"ls"}`)),
				tool(resultOf("c1", "approval", `{"approved":true}`))},
			id: "c1", key: "",
		},
		{
			name: "a bare boolean counts only with kind",
			messages: []runnel.Message{user("list"), assistant(callOf("c1", "bash", `{"command":"ls"}`), callOf("c2", "bash", `{"command":"pwd"}`)),
				tool(resultOf("c1", "approval", `true`), resultOf("c2", "", `true`))},
			id: "c1", key: lsKey,
			want: &Decision{ToolCallID: "c1", ToolName: "bash", Key: lsKey, Args: `{"command":"ls"}`, Approved: true},
		},
		{
			name: "unreadable approval is a denial",
			messages: []runnel.Message{user("list"), assistant(callOf("c1", "bash", `{"command":"ls"}`)),
				tool(resultOf("c1", "approval", `"sure"`))},
			id: "c1", key: lsKey,
			want: &Decision{ToolCallID: "c1", ToolName: "bash", Key: lsKey, Args: `{"command":"ls"}`},
		},
		{
			name: "a client output that contains approved is not an approval",
			messages: []runnel.Message{user("connect"), assistant(callOf("c1", "confirm", `{}`)),
				userBlocks(resultOf("c1", "client_output", `{"approved":true}`))},
			opts: ExtractOptions{IsClientTool: func(n string) bool { return n == "confirm" }},
			id:   "c1", key: "confirm#{}",
		},
		{
			name: "another kind is not an approval",
			messages: []runnel.Message{user("x"), assistant(callOf("c1", "f", `{}`)),
				tool(resultOf("c1", "something_else", `{"approved":true}`))},
			id: "c1", key: "f#{}",
		},
		{
			name: "deferred result is skipped",
			messages: []runnel.Message{user("x"), assistant(callOf("c1", "f", `{}`)),
				tool(resultOf("c1", "approval", `"DEFERRED_NOT_EXECUTED: paused for another approval; retry the same call if still required."`))},
			id: "c1", key: "f#{}",
		},
		{
			name: "approvals come from the whole history",
			messages: []runnel.Message{user("first"), assistant(callOf("c1", "bash", `{"command":"ls"}`)),
				userBlocks(resultOf("c1", "approval", `{"approved":true}`)), user("never mind, something else")},
			id: "new-id", key: lsKey,
			want: &Decision{ToolCallID: "c1", ToolName: "bash", Key: lsKey, Args: `{"command":"ls"}`, Approved: true},
		},
		{
			name: "an approval whose call has run is spent",
			messages: []runnel.Message{user("first"), assistant(callOf("c1", "bash", `{"command":"ls"}`)),
				userBlocks(resultOf("c1", "approval", `{"approved":true}`)),
				tool(resultOf("c1", "", `"a.txt"`)), assistant(runnel.Block{Type: runnel.BlockText, Text: "done"}), user("again")},
			id: "c2", key: lsKey,
		},
		{
			name: "an approval without its call keys from the block itself",
			messages: []runnel.Message{user("x"),
				userBlocks(runnel.Block{Type: runnel.BlockToolResult, ToolCallID: "c9", ToolName: "bash", Input: json.RawMessage(`{"command":"ls","timeout":3}`),
					Kind: "approval", Output: json.RawMessage(`{"approved":true}`)})},
			id: "c1", key: lsKey,
			want: &Decision{ToolCallID: "c9", ToolName: "bash", Key: lsKey, Args: `{"command":"ls","timeout":3}`, Approved: true},
		},
		{
			name: "keys strip server prefixes and bound paths",
			messages: []runnel.Message{user("x"), assistant(callOf("c1", "mcp__memory__search", `{"q":"x","org":"model-guess"}`)),
				userBlocks(resultOf("c1", "approval", `{"approved":true}`))},
			opts: ExtractOptions{Servers: []string{"memory"}, BoundPaths: func(n string) []string {
				if n == "search" {
					return []string{"org"}
				}
				return nil
			}},
			id: "", key: `search#{"q":"x"}`,
			want: &Decision{ToolCallID: "c1", ToolName: "mcp__memory__search", Key: `search#{"q":"x"}`, Args: `{"org":"model-guess","q":"x"}`, Approved: true},
		},
		{
			name: "a reused id answers the nearest earlier call",
			messages: []runnel.Message{user("one"), assistant(callOf("call_0", "bash", `{"command":"ls"}`)), tool(resultOf("call_0", "", `"a.txt"`)),
				user("two"), assistant(callOf("call_0", "bash", `{"command":"rm -rf build"}`)),
				userBlocks(resultOf("call_0", "approval", `{"approved":true}`))},
			id: "call_0", key: `Bash#{"command":"rm -rf build"}`,
			want: &Decision{ToolCallID: "call_0", ToolName: "bash", Key: `Bash#{"command":"rm -rf build"}`, Args: `{"command":"rm -rf build"}`, Approved: true},
		},
		{
			name: "an id match needs the key to agree",
			messages: []runnel.Message{user("two"), assistant(callOf("call_0", "bash", `{"command":"ls"}`)),
				userBlocks(resultOf("call_0", "approval", `{"approved":true}`))},
			id: "call_0", key: `Bash#{"command":"rm -rf /"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Extract(tt.messages, tt.opts)
			got, ok := s.TakeDecision(CallRef{ID: tt.id, Key: tt.key})
			if ok != (got != nil) {
				t.Fatalf("TakeDecision = %v, %v", got, ok)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("TakeDecision(%q, %q) (-want +got)\n%s", tt.id, tt.key, diff)
			}
			if again, ok := s.TakeDecision(CallRef{ID: tt.id, Key: tt.key}); ok {
				t.Errorf("second TakeDecision = %+v: each decision is consumed once", again)
			}
		})
	}
}

func TestExtractOutputs(t *testing.T) {
	isClient := ExtractOptions{Servers: []string{"runnel"}, IsClientTool: func(n string) bool { return n == "connect" }}
	tests := []struct {
		name     string
		messages []runnel.Message
		id, key  string
		want     *Output
	}{
		{
			name: "client output with kind",
			messages: []runnel.Message{user("connect gmail"), assistant(callOf("c1", "connect", `{"app":"gmail"}`)),
				userBlocks(resultOf("c1", "client_output", `{"approved":true,"connection":"conn_1"}`))},
			id: "c1", key: `connect#{"app":"gmail"}`,
			want: &Output{ToolCallID: "c1", ToolName: "connect", Key: `connect#{"app":"gmail"}`, Output: json.RawMessage(`{"approved":true,"connection":"conn_1"}`)},
		},
		{
			name: "client output by the tool, without kind",
			messages: []runnel.Message{user("connect gmail"), assistant(callOf("c1", "mcp__runnel__connect", `{"app":"gmail"}`)),
				tool(runnel.Block{Type: runnel.BlockToolResult, ToolCallID: "c1", Output: json.RawMessage(`"closed"`), IsError: true})},
			id: "c2", key: `connect#{"app":"gmail"}`,
			want: &Output{ToolCallID: "c1", ToolName: "mcp__runnel__connect", Key: `connect#{"app":"gmail"}`, Output: json.RawMessage(`"closed"`), IsError: true},
		},
		{
			name: "an ordinary tool's result is no client output",
			messages: []runnel.Message{user("x"), assistant(callOf("c1", "fetch", `{}`)),
				tool(resultOf("c1", "", `"page"`))},
			id: "c1", key: "fetch#{}",
		},
		{
			name: "outputs before the latest user message are ignored",
			messages: []runnel.Message{user("connect gmail"), assistant(callOf("c1", "connect", `{"app":"gmail"}`)),
				userBlocks(resultOf("c1", "client_output", `{"connection":"conn_1"}`)), user("and again")},
			id: "c1", key: `connect#{"app":"gmail"}`,
		},
		{
			name: "deferred results are skipped",
			messages: []runnel.Message{user("connect gmail"), assistant(callOf("c1", "connect", `{"app":"gmail"}`)),
				tool(resultOf("c1", "client_output", `"DEFERRED_NOT_EXECUTED: paused for another approval; retry the same call if still required."`))},
			id: "c1", key: `connect#{"app":"gmail"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Extract(tt.messages, isClient)
			ref := CallRef{ID: tt.id, Key: tt.key}
			if peeked, _ := s.PeekOutput(ref); !cmp.Equal(tt.want, peeked) {
				t.Fatalf("PeekOutput (-want +got)\n%s", cmp.Diff(tt.want, peeked))
			}
			got, _ := s.TakeOutput(ref)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("TakeOutput (-want +got)\n%s", diff)
			}
			if again, ok := s.TakeOutput(ref); ok {
				t.Errorf("second TakeOutput = %+v: each output is consumed once", again)
			}
			if d, ok := s.TakeDecision(ref); ok {
				t.Errorf("a client output was stored as a decision too: %+v", d)
			}
		})
	}
}

// approvalsForOneKey answers three identical calls: approve, deny, approve.
func approvalsForOneKey() []runnel.Message {
	return []runnel.Message{user("clean up"),
		assistant(callOf("c1", "bash", `{"command":"make clean"}`), callOf("c2", "bash", `{"command":"make clean"}`), callOf("c3", "bash", `{"command":"make clean"}`)),
		userBlocks(resultOf("c1", "approval", `{"approved":true}`), resultOf("c2", "approval", `{"approved":false}`), resultOf("c3", "approval", `{"approved":true}`))}
}

func TestStoreFIFOPerKey(t *testing.T) {
	key := `Bash#{"command":"make clean"}`
	s := Extract(approvalsForOneKey(), ExtractOptions{})
	var got []string
	for {
		if _, ok := s.PeekDecision(CallRef{Key: key}); !ok {
			break
		}
		d, _ := s.TakeDecision(CallRef{Key: key})
		got = append(got, d.ToolCallID)
	}
	if diff := cmp.Diff([]string{"c1", "c2", "c3"}, got); diff != "" {
		t.Fatalf("taken by key (-want +got)\n%s", diff)
	}
	if _, ok := s.TakeDecision(CallRef{ID: "c1", Key: key}); ok {
		t.Fatal("an entry taken by key was still there by id")
	}
}

func TestStoreIDMatchBeatsKeyMatch(t *testing.T) {
	key := `Bash#{"command":"make clean"}`
	s := Extract(approvalsForOneKey(), ExtractOptions{})
	d, _ := s.TakeDecision(CallRef{ID: "c2", Key: key})
	if d == nil || d.ToolCallID != "c2" || d.Approved {
		t.Fatalf("TakeDecision(c2) = %+v, want c2's denial although c1 is older", d)
	}
	d, _ = s.TakeDecision(CallRef{ID: "new-id", Key: key})
	if d == nil || d.ToolCallID != "c1" {
		t.Fatalf("TakeDecision by key = %+v, want the oldest left, c1", d)
	}
	d, _ = s.TakeDecision(CallRef{ID: "c1", Key: key})
	if d == nil || d.ToolCallID != "c3" {
		t.Fatalf("TakeDecision(c1) after c1 was taken = %+v, want c3 by key", d)
	}
	if d, ok := s.TakeDecision(CallRef{ID: "c3", Key: key}); ok {
		t.Fatalf("TakeDecision(c3) = %+v, want nothing: every entry was consumed once", d)
	}
}

// TestExactStoreBindsToTheSignedCall: with signing, a decision runs only
// the call it was given for: not a forged call with a new id and the same
// key, not the same id with other arguments, not a call that cannot be
// keyed.
func TestExactStoreBindsToTheSignedCall(t *testing.T) {
	key := `Bash#{"command":"make clean"}`
	args := `{"command":"make clean"}`
	messages := []runnel.Message{user("clean up"), assistant(callOf("c1", "bash", args)),
		userBlocks(resultOf("c1", "approval", `{"approved":true}`))}
	s := Extract(messages, ExtractOptions{Exact: true})
	for _, forged := range []CallRef{
		{ID: "c2", Name: "bash", Key: key, Args: args},                                           // another id, same key
		{ID: "c1", Name: "bash", Key: key, Args: `{"command":"make clean","timeout_ms":999999}`}, // same key, other arguments
		{ID: "c1", Name: "Bash", Key: key, Args: args},                                           // another name
		{ID: "c1", Name: "bash", Key: "", Args: args},                                            // cannot be keyed
		{ID: "c1", Name: "bash", Key: key, Args: ""},                                             // not canonical
	} {
		if d, ok := s.TakeDecision(forged); ok {
			t.Errorf("TakeDecision(%+v) = %+v, want nothing", forged, d)
		}
	}
	if d, ok := s.TakeDecision(CallRef{ID: "c1", Name: "bash", Key: key, Args: args}); !ok || !d.Approved {
		t.Fatalf("the signed call itself: TakeDecision = %+v, %v; want its approval", d, ok)
	}
}

// TestExactStoreReissuedCall: an external agent re-issues an approved call
// after a cold resume under an id of its own, and asks without one. It
// gets the approval only for the very name and arguments signed, and
// only once.
func TestExactStoreReissuedCall(t *testing.T) {
	key := `Bash#{"command":"make clean"}`
	args := `{"command":"make clean"}`
	messages := []runnel.Message{user("clean up"), assistant(callOf("c1", "bash", args)),
		userBlocks(resultOf("c1", "approval", `{"approved":true}`))}
	s := Extract(messages, ExtractOptions{Exact: true})
	for _, other := range []CallRef{
		{Name: "bash", Key: key, Args: `{"command":"make clean","timeout_ms":999999}`},
		{Name: "Bash", Key: key, Args: args},
		{Name: "bash", Key: "", Args: args},
	} {
		if d, ok := s.PeekDecision(other); ok {
			t.Errorf("PeekDecision(%+v) = %+v, want nothing", other, d)
		}
	}
	reissued := CallRef{Name: "bash", Key: key, Args: args}
	if _, ok := s.PeekDecision(reissued); !ok {
		t.Fatal("PeekDecision of the re-issued call found nothing")
	}
	if d, ok := s.TakeDecision(reissued); !ok || !d.Approved {
		t.Fatalf("TakeDecision = %+v, %v; want the approval", d, ok)
	}
	if d, ok := s.TakeDecision(reissued); ok {
		t.Fatalf("a second TakeDecision = %+v: one approval ran two calls", d)
	}
}

func TestUnanswered(t *testing.T) {
	deferred := resultOf("c2", "", `"DEFERRED_NOT_EXECUTED: paused for another approval; retry the same call if still required."`)
	parkedTurn := []runnel.Message{
		user("first"), assistant(callOf("c0", "f", `{}`)), tool(resultOf("c0", "", `"ok"`)),
		user("second"),
		assistant(callOf("c1", "bash", `{"command":"rm x"}`), callOf("c2", "fetch", `{"u":1}`), callOf("c3", "ls", `{}`)),
		tool(deferred, resultOf("c3", "", `"a b"`)),
	}
	tests := []struct {
		name     string
		messages []runnel.Message
		want     []ParkedCall
	}{
		{
			name:     "a newer user message leaves parked calls",
			messages: append(append([]runnel.Message{}, parkedTurn...), user("actually, stop")),
			want: []ParkedCall{
				{ToolCallID: "c1", ToolName: "bash", Input: json.RawMessage(`{"command":"rm x"}`)},
				{ToolCallID: "c2", ToolName: "fetch", Input: json.RawMessage(`{"u":1}`), Deferred: true},
			},
		},
		{
			name: "an answer after the new message counts",
			messages: append(append([]runnel.Message{}, parkedTurn...), user("actually, stop"),
				userBlocks(resultOf("c1", "approval", `{"approved":true}`))),
			want: []ParkedCall{{ToolCallID: "c2", ToolName: "fetch", Input: json.RawMessage(`{"u":1}`), Deferred: true}},
		},
		{
			name: "a resume without a new user message parks nothing",
			messages: append(append([]runnel.Message{}, parkedTurn...),
				userBlocks(resultOf("c1", "approval", `{"approved":true}`))),
		},
		{
			name: "the turn before the prompt is the one that counts",
			messages: []runnel.Message{user("first"), assistant(callOf("c0", "f", `{}`)),
				user("second"), assistant(callOf("c1", "f", `{"n":1}`)),
				userBlocks(resultOf("c1", "approval", `{"approved":true}`))},
			want: []ParkedCall{{ToolCallID: "c0", ToolName: "f", Input: json.RawMessage(`{}`)}},
		},
		{
			name:     "no user text",
			messages: []runnel.Message{assistant(callOf("c1", "f", `{}`))},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Unanswered(tt.messages)); diff != "" {
				t.Errorf("Unanswered (-want +got)\n%s", diff)
			}
		})
	}
}

func TestStoreIsSafeForConcurrentUse(t *testing.T) {
	key := `Bash#{"command":"make clean"}`
	s := Extract(approvalsForOneKey(), ExtractOptions{})
	taken := make(chan string, 10)
	done := make(chan struct{})
	for range 10 {
		go func() {
			defer func() { done <- struct{}{} }()
			if d, ok := s.TakeDecision(CallRef{Key: key}); ok {
				taken <- d.ToolCallID
			}
		}()
	}
	for range 10 {
		<-done
	}
	close(taken)
	seen := map[string]bool{}
	for id := range taken {
		if seen[id] {
			t.Fatalf("%s taken twice", id)
		}
		seen[id] = true
	}
	if len(seen) != 3 {
		t.Fatalf("took %d decisions, want 3", len(seen))
	}
}
