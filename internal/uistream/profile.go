// Package uistream speaks the Vercel AI SDK's UI Message Stream (DESIGN
// §3.6), so that `useChat` can talk to runnel directly: it reads the
// UIMessages a chat client posts into runnel's conversation blocks, and
// turns a run's events into the stream's chunks, in the order the AI SDK's
// client code requires and with only the chunk types, keys and finish
// reasons the chosen client version accepts.
//
//	chat, err := uistream.Decode(body)               // the transport body, strictly
//	st := uistream.NewStream(uistream.Options{…})    // one per answer
//	for _, c := range st.Start() { write(c) }
//	…each event: for _, c := range st.Event(e) { write(c) }
//	for _, c := range st.Finish(res) { write(c) }
//
// It does no I/O: internal/server frames the chunks as server-sent events.
//
// What each major accepts was read from the `ai` packages' own dist code
// (the uiMessageChunkSchema of 5.0.0, 5.0.216, 6.0.0, 6.0.230, 7.0.0,
// 7.0.31 and 7.0.173); internal/uitest feeds runnel's stream to those
// clients and fails on any chunk one rejects.
package uistream

import "fmt"

// Profile is a compatibility profile: the AI SDK major whose client reads
// the stream. Clients of 5.0.0–5.0.216, 6.0.0–6.0.230 and 7.0.0–7.0.31
// reject keys they do not know, and every version rejects chunk types and
// finish reasons it does not know, so each profile emits only what the
// oldest release of its major accepts.
type Profile string

// The profiles.
const (
	// AI5: no approval chunks (an approval is presented as a client tool
	// whose data-runnel-interaction part has render {kind: "approval"}),
	// no tool-output-denied, and no finishReason (5.0.0 has none).
	AI5 Profile = "ai5"
	// AI6: tool-approval-request {approvalId, toolCallId} and
	// tool-output-denied; finish reasons stop, length, content-filter,
	// tool-calls, error, other.
	AI6 Profile = "ai6"
	// AI7: as AI6, and the approval's signature on tool-approval-request
	// (7.0.0 takes it; 6.0.0 does not). Not "interrupted", which only
	// 7.0.149 and later accept.
	AI7 Profile = "ai7"
)

// DefaultProfile is the profile of a request that names none: ai6, whose
// stream every ai@6 and ai@7 client reads. An ai@5 client must ask for
// ai5, since an approval needs chunks it does not have.
const DefaultProfile = AI6

// ParseProfile reads a compat value; "" is DefaultProfile.
func ParseProfile(s string) (Profile, error) {
	switch p := Profile(s); p {
	case "":
		return DefaultProfile, nil
	case AI5, AI6, AI7:
		return p, nil
	}
	return "", fmt.Errorf("compat %q is not a profile runnel knows; use \"ai5\", \"ai6\" or \"ai7\" (the AI SDK major of your client)", s)
}

func (p Profile) approvals() bool    { return p != AI5 }
func (p Profile) finishReason() bool { return p != AI5 }
func (p Profile) signature() bool    { return p == AI7 }
