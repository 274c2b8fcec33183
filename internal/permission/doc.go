// Package permission decides whether a tool call may run (DESIGN §5): the
// permission plan and its gates, the call key that matches a replayed
// answer to a re-issued call, the decisions and client outputs stored in a
// replayed conversation, and the signature of an interaction.
//
//	plan := permission.ParsePlan(req.Permissions)
//	store := permission.Extract(req.Messages, permission.ExtractOptions{Servers: servers, IsClientTool: isClient})
//	key, _ := permission.Key(call.Name, call.Input, permission.KeyOptions{Servers: servers, BoundPaths: bound})
//	ref := permission.CallRef{ID: call.ID, Name: call.Name, Key: key}
//	switch verdict, decision := plan.Decide(gate, store, ref); verdict {
//	case permission.VerdictAllow: // run it
//	case permission.VerdictDeny: // refuse it, with decision.Reason if a person gave one
//	case permission.VerdictPending: // pause for the person (or, for a client tool, the browser)
//	}
//
// # Decisions
//
// The effective permission of a gate is
//
//	spec ?? server ?? strongest matching rule (deny > ask > allow) ?? default
//
// with the default allow_reads meaning allow when the gate's read-only
// hint is true and ask otherwise (unknown counts as a write). The verdict
// is deny or allow as the permission says; under ask it is the stored
// decision for the call, consumed once, or a pause.
//
// The same function decides every executor, client tools included. DESIGN
// §5.1 gives client tools "spec ?? (default == deny ? deny : allow)", but
// the golden cases (agenta/permission_decisions.json) decide a client gate
// under default ask as ask, settled by a stored decision, and the golden
// file wins. The two agree on what a caller does: for a client tool, allow
// and pendingApproval both mean "serve the browser's stored output, or
// pause for the browser" (never an approval prompt first), deny refuses it,
// and under ask a stored denial refuses it. Rules also apply to client
// tools, which DESIGN's shortcut would skip; a deny rule that names a
// client tool is meant.
//
// Rules use Claude settings syntax. "Name" matches the tool name; builtin
// names (read, write, edit, ls, find, grep, bash) match in any case.
// "Name(arg:*)" matches when the gate's Argument starts with arg,
// "Name(arg)" when it equals arg. The Argument is fixed per tool, never
// chosen by the model: the command of Bash, the path of a file builtin,
// the first string property a custom or MCP tool's schema declares
// (SchemaArgument), read with the same decoding the tool uses. A rule
// with an argument that cannot inspect the call (no such argument, or not
// a string) does not match, except a deny rule, which then asks: a rule
// written to stop some arguments fails toward asking a person, never
// toward allowing. A prefix rule is a convenience, not a sandbox:
// "Bash(rm:*)" does not stop " rm" or "sh -c rm".
//
// # Replayed answers
//
// ReadReplay reads a replayed conversation once: every result tied to the
// call it answers and classified (kind first, then the shape), with one
// approval reader (ReadApproval), strict about member names, for the store
// and for the signature check alike. A decision is never taken by a call
// that cannot be keyed; an Exact store (signing on) gives it only to the
// call with the same id, name and canonical arguments.
//
// # Call keys
//
// See Key. Strings holding a JSON object or array are replaced by the
// value (after trimming up to three stray closing brackets, but only from
// a string that does not parse as it is). Objects are written with keys
// sorted by UTF-16 code units and numbers as JavaScript writes them. JSON
// null is a value and stays; the "keys with no value" of DESIGN are
// JavaScript's undefined, which JSON cannot carry. Lone surrogates written
// as \u escapes are kept and written back as \udxxx, as JSON.stringify
// does; raw invalid UTF-8 becomes U+FFFD.
package permission
