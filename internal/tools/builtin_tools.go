package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/runnel/runnel/internal/sandbox"
	"github.com/runnel/runnel/internal/strictjson"
)

// BuiltinTool is one builtin tool (DESIGN §4.5), ready to advertise to a
// model and to run. Run never fails the run: every problem is a Result
// with IsError, in a sentence the model can act on.
type BuiltinTool struct {
	// Name is the model-facing name: read, write, edit, ls, find, grep or
	// bash. The permission layer keys and matches it as Read, Write, ….
	Name        string
	Description string
	// Schema is the JSON Schema of the arguments, with required fields.
	Schema json.RawMessage
	// ReadOnly is true for read, ls, find and grep: they count as reads
	// under the allow_reads default.
	ReadOnly bool
	Run      func(ctx context.Context, input json.RawMessage) Result
	// Subject is the argument permission rules inspect ("Bash(npm:*)",
	// "Write(secret/:*)"), read from the arguments exactly as Run reads
	// them: the command of bash, the path of the file tools, resolved to
	// the workspace-relative path the tool will touch (so "./secret/x",
	// "a/../secret/x", the absolute path and a symlink into secret/ all
	// read "secret/x"). Nil when the call has none to inspect (arguments
	// Run would refuse, a path outside the workspace).
	Subject func(input json.RawMessage) *string
}

// BuiltinOptions configures the builtins. A nil value means the defaults.
type BuiltinOptions struct {
	// Command configures bash: MaxTimeout, MaxOutput and Env apply to
	// every command, and Timeout is the default when the model sets no
	// timeout_ms (see sandbox.CommandOptions for the defaults).
	Command *sandbox.CommandOptions
}

// The caps on what one builtin call returns, so a large file or tree
// cannot flood the model's context.
const (
	maxReadLines   = 2000
	maxReadBytes   = 256 << 10
	maxLineBytes   = 2000
	maxEditBytes   = 10 << 20
	maxWriteBytes  = 10 << 20
	maxListEntries = 1000
	maxFindResults = 1000
	maxGrepMatches = 500
	maxGrepBytes   = 256 << 10
	maxGrepLine    = 1 << 20
	maxWalkEntries = 200_000
	sniffBytes     = 8000
)

// NewBuiltins returns the granted builtins, working in ws, in the fixed
// order of Builtins() so that the advertisement is the same from one
// request to the next. Grants are matched case-insensitively; names that
// are not builtins are ignored (ParseBuiltins refuses them earlier).
func NewBuiltins(grants []string, ws *sandbox.Workspace, opts *BuiltinOptions) []BuiltinTool {
	var o BuiltinOptions
	if opts != nil {
		o = *opts
	}
	b := &builtins{ws: ws}
	if o.Command != nil {
		b.command = *o.Command
	}
	all := map[string]func() BuiltinTool{
		"read": b.read, "write": b.write, "edit": b.edit, "ls": b.ls,
		"find": b.find, "grep": b.grep, "bash": b.bash,
	}
	var out []BuiltinTool
	for _, name := range Builtins() {
		granted := slices.ContainsFunc(grants, func(g string) bool {
			return strings.EqualFold(strings.TrimSpace(g), name)
		})
		if granted {
			out = append(out, all[name]())
		}
	}
	return out
}

// builtins holds what the tools of one run share.
type builtins struct {
	ws      *sandbox.Workspace
	command sandbox.CommandOptions
	// writeMu serializes write and edit: a model often edits one file
	// twice in the same step, and the calls run concurrently.
	writeMu sync.Mutex
}

func toolErrorf(format string, args ...any) Result {
	return textResult(fmt.Sprintf(format, args...), true)
}

// decodeBuiltinArgs reads a call's arguments into v, or says what is wrong.
// It reads strictly and matches names exactly (internal/strictjson), as the
// permission gate reads them: {"COMMAND": …} is no command, and a name
// given twice is refused, so the gate and the tool never see two calls.
func decodeBuiltinArgs(tool string, input json.RawMessage, v any) (Result, bool) {
	if len(input) == 0 {
		input = json.RawMessage(`{}`)
	}
	err := strictjson.Unmarshal(input, v)
	if err == nil {
		return Result{}, true
	}
	var strict *strictjson.Error
	if errors.As(err, &strict) && !strict.Syntax {
		return toolErrorf("Tool '%s' arguments are ambiguous: the object %s. Retry the tool call with each argument named once.", tool, err), false
	}
	var fe *flexError
	if errors.As(err, &fe) {
		return toolErrorf("Tool '%s' argument must be a number, not %s. Retry the tool call with a corrected value.", tool, fe.raw), false
	}
	var se *jsonv2.SemanticError
	if errors.As(err, &se) && se.JSONPointer != "" && se.GoType != nil {
		return toolErrorf("Tool '%s' argument %s must be %s. Retry the tool call with a corrected value.",
			tool, strings.TrimPrefix(string(se.JSONPointer), "/"), jsonKindName(se.GoType.Kind().String())), false
	}
	return toolErrorf("Tool '%s' arguments must be one JSON object. Retry the tool call with valid arguments.", tool), false
}

func jsonKindName(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "int", "int64", "float64":
		return "a number"
	}
	return "a " + kind
}

// missingArgs is the dispatcher's sentence for absent required arguments,
// repeated here for a call that reaches a builtin without that check.
func missingArgs(tool string, fields ...string) Result {
	return toolErrorf("Tool '%s' missing required argument(s): %s. Retry the tool call with those argument fields populated.", tool, strings.Join(fields, ", "))
}

// flexInt is a number that a model may also send as a string ("20").
type flexInt int

type flexError struct{ raw string }

func (e *flexError) Error() string { return e.raw + " is not a number" }

func (n *flexInt) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	if s == "null" {
		return nil
	}
	if uq, err := strconv.Unquote(s); err == nil {
		s = strings.TrimSpace(uq)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) {
		return &flexError{raw: string(b)}
	}
	// Clamped, because converting a float beyond the int range is
	// undefined in Go (a huge timeout_ms would come out negative).
	*n = flexInt(max(min(f, maxFlexInt), -maxFlexInt))
	return nil
}

// maxFlexInt bounds a flexInt far beyond any count or millisecond timeout
// a tool accepts, and far within int64.
const maxFlexInt = 1 << 50

// rel resolves a model-supplied path in the workspace, or says why not.
func (b *builtins) rel(p string) (string, Result, bool) {
	rel, err := b.ws.Rel(p)
	switch {
	case errors.Is(err, sandbox.ErrOutsideWorkspace):
		return "", toolErrorf("%s. Every path must stay inside the workspace %s; relative paths start there.", sentenceCase(err.Error()), b.ws.Dir()), false
	case err != nil:
		return "", toolErrorf("%s.", sentenceCase(err.Error())), false
	}
	return rel, Result{}, true
}

// open opens rel for reading without blocking: a command may have left a
// FIFO in the workspace, and opening one for reading waits for a writer.
// Callers refuse anything that is not a regular file or a directory.
func (b *builtins) open(rel string) (*os.File, error) {
	return b.ws.Root().OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}

// fsFailure turns a file system error into a sentence about the path the
// model gave.
func fsFailure(verb, p string, err error) Result {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return toolErrorf("%q does not exist.", p)
	case errors.Is(err, syscall.ENOTDIR):
		return toolErrorf("A parent of %q is a file, not a directory.", p)
	case errors.Is(err, syscall.EISDIR):
		return toolErrorf("%q is a directory.", p)
	case errors.Is(err, fs.ErrPermission):
		return toolErrorf("Permission denied: cannot %s %q.", verb, p)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return toolErrorf("Cannot %s %q: %v.", verb, p, err)
}

func sentenceCase(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// shownPath is how a workspace-relative path appears in results.
func shownPath(rel string) string {
	if rel == "." {
		return "./"
	}
	return rel
}

// pathSubject is the Subject of a file tool: its path argument (def when
// absent), resolved inside the workspace as the tool resolves it.
func (b *builtins) pathSubject(tool, def string) func(json.RawMessage) *string {
	return func(input json.RawMessage) *string {
		var args struct {
			Path string `json:"path"`
		}
		if _, ok := decodeBuiltinArgs(tool, input, &args); !ok {
			return nil
		}
		if args.Path == "" {
			args.Path = def
		}
		if args.Path == "" {
			return nil
		}
		rel, err := b.ws.Rel(args.Path)
		if err != nil {
			return nil
		}
		return &rel
	}
}
