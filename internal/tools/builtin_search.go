package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"
)

// maxGlobAlternatives bounds brace expansion, so {a,b}{c,d}… cannot
// multiply without end.
const maxGlobAlternatives = 64

func (b *builtins) find() BuiltinTool {
	return BuiltinTool{
		Name: "find",
		Description: "Find files and directories in the workspace by glob pattern. * and ? match within one " +
			"path segment, ** matches any number of directories, {a,b} matches either. A pattern without / matches " +
			"names at any depth (\"*.go\" finds every Go file); one with / matches paths relative to path " +
			"(\"src/**/*_test.go\"). Results are workspace-relative, sorted, directories end with /, at most 1000. " +
			".git directories are skipped.",
		Schema: json.RawMessage(`{"type":"object","properties":{` +
			`"pattern":{"type":"string","description":"The glob pattern, e.g. **/*.ts or *.{md,txt}."},` +
			`"path":{"type":"string","description":"The directory to search, relative to the workspace root. Default: the root."}` +
			`},"required":["pattern"]}`),
		ReadOnly: true,
		Run:      b.runFind,
		Subject:  b.pathSubject("find", "."),
	}
}

func (b *builtins) runFind(ctx context.Context, input json.RawMessage) Result {
	var args struct {
		Pattern string `json:"pattern"`
		Path    string `json:"path"`
	}
	if r, ok := decodeBuiltinArgs("find", input, &args); !ok {
		return r
	}
	if args.Pattern == "" {
		return missingArgs("find", "pattern")
	}
	glob, err := parseGlob(args.Pattern)
	if err != nil {
		return toolErrorf("%s.", sentenceCase(err.Error()))
	}
	base, r, ok := b.searchDir(args.Path, "find")
	if !ok {
		return r
	}
	var out strings.Builder
	found := 0
	truncated, err := b.walk(ctx, base, func(p, under string, d fs.DirEntry) bool {
		if !glob.match(under) {
			return false
		}
		found++
		if found <= maxFindResults {
			out.WriteString(p)
			if d.IsDir() {
				out.WriteByte('/')
			}
			out.WriteByte('\n')
		}
		return false
	})
	if err != nil {
		return walkFailure(ctx, "search", args.Path, err)
	}
	if found == 0 {
		return textResult(fmt.Sprintf("No files match %q under %s.", args.Pattern, shownPath(base)), false)
	}
	if found > maxFindResults {
		fmt.Fprintf(&out, "[... %d more matches not shown; narrow the pattern or the path.]\n", found-maxFindResults)
	}
	if truncated {
		fmt.Fprintf(&out, "[The search stopped after %d entries; narrow the path.]\n", maxWalkEntries)
	}
	return textResult(out.String(), false)
}

func (b *builtins) grep() BuiltinTool {
	return BuiltinTool{
		Name: "grep",
		Description: "Search file contents in the workspace with a regular expression (Go RE2 syntax: no " +
			"backreferences or lookaround). Prints matching lines as file:line:text, at most 500 matches. " +
			"path may be a directory (searched recursively) or one file; glob filters file names like find's pattern " +
			"(\"*.go\", \"src/**/*.ts\"). Binary files and .git directories are skipped.",
		Schema: json.RawMessage(`{"type":"object","properties":{` +
			`"pattern":{"type":"string","description":"The regular expression to search for."},` +
			`"path":{"type":"string","description":"The directory or file to search, relative to the workspace root. Default: the root."},` +
			`"glob":{"type":"string","description":"Only search files matching this glob, e.g. *.py."},` +
			`"ignore_case":{"type":"boolean","description":"Match without regard to case. Default false."}` +
			`},"required":["pattern"]}`),
		ReadOnly: true,
		Run:      b.runGrep,
		Subject:  b.pathSubject("grep", "."),
	}
}

func (b *builtins) runGrep(ctx context.Context, input json.RawMessage) Result {
	var args struct {
		Pattern    string `json:"pattern"`
		Path       string `json:"path"`
		Glob       string `json:"glob"`
		IgnoreCase bool   `json:"ignore_case"`
	}
	if r, ok := decodeBuiltinArgs("grep", input, &args); !ok {
		return r
	}
	if args.Pattern == "" {
		return missingArgs("grep", "pattern")
	}
	expr := args.Pattern
	if args.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return toolErrorf("pattern is not a valid regular expression (Go RE2 syntax): %s.", strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	}
	var glob globPattern
	if args.Glob != "" {
		if glob, err = parseGlob(args.Glob); err != nil {
			return toolErrorf("%s.", sentenceCase(err.Error()))
		}
	}
	if args.Path == "" {
		args.Path = "."
	}
	rel, r, ok := b.rel(args.Path)
	if !ok {
		return r
	}
	fi, err := b.ws.Root().Stat(rel)
	if err != nil {
		return fsFailure("search", args.Path, err)
	}
	g := &grepOutput{}
	var truncated bool
	if !fi.IsDir() {
		b.grepFile(rel, re, g)
	} else {
		truncated, err = b.walk(ctx, rel, func(p, under string, d fs.DirEntry) bool {
			if !d.Type().IsRegular() || args.Glob != "" && !glob.match(under) {
				return false
			}
			b.grepFile(p, re, g)
			return g.full
		})
		if err != nil {
			return walkFailure(ctx, "search", args.Path, err)
		}
	}
	if g.matches == 0 {
		return textResult("No matches found.", false)
	}
	if g.full {
		fmt.Fprintf(&g.out, "[The search stopped at %d matches or %d KiB; narrow the pattern, path or glob to see the rest.]\n", maxGrepMatches, maxGrepBytes>>10)
	}
	if truncated {
		fmt.Fprintf(&g.out, "[The search stopped after %d entries; narrow the path.]\n", maxWalkEntries)
	}
	return textResult(g.out.String(), false)
}

// grepOutput collects matching lines up to the caps.
type grepOutput struct {
	out     strings.Builder
	matches int
	full    bool
}

// grepFile adds the matching lines of one text file. A file that cannot
// be read, or looks binary, is skipped: one bad file should not hide the
// matches in the others.
func (b *builtins) grepFile(rel string, re *regexp.Regexp, g *grepOutput) {
	f, err := b.open(rel)
	if err != nil {
		return
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return
	}
	br := bufio.NewReaderSize(f, 64<<10)
	if head, _ := br.Peek(sniffBytes); bytes.IndexByte(head, 0) >= 0 {
		return
	}
	for n := 1; ; n++ {
		line, _, err := readCappedLine(br, maxGrepLine)
		if err != nil {
			return
		}
		if !re.Match(line) {
			continue
		}
		if g.matches == maxGrepMatches || g.out.Len() >= maxGrepBytes {
			g.full = true
			return
		}
		g.matches++
		if len(line) > maxLineBytes {
			line = append(trimPartialRune(line[:maxLineBytes]), " [... line cut]"...)
		}
		fmt.Fprintf(&g.out, "%s:%d:%s\n", rel, n, line)
	}
}

// searchDir resolves the directory find searches.
func (b *builtins) searchDir(p, tool string) (string, Result, bool) {
	if p == "" {
		p = "."
	}
	rel, r, ok := b.rel(p)
	if !ok {
		return "", r, false
	}
	fi, err := b.ws.Root().Stat(rel)
	switch {
	case err != nil:
		return "", fsFailure("search", p, err), false
	case !fi.IsDir():
		return "", toolErrorf("%q is a file; %s searches directories.", p, tool), false
	}
	return rel, Result{}, true
}

// walk calls fn for every entry below the directory base, in lexical
// order, with its workspace-relative path and its path relative to base,
// until fn returns true. Symbolic links are listed, never followed, and
// .git directories are skipped. It reports whether it stopped at
// maxWalkEntries.
func (b *builtins) walk(ctx context.Context, base string, fn func(p, under string, d fs.DirEntry) bool) (bool, error) {
	seen, truncated := 0, false
	err := fs.WalkDir(b.ws.Root().FS(), base, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil && p == base:
			return err
		case err != nil:
			return nil // an unreadable directory is skipped
		case p == base:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case d.IsDir() && d.Name() == ".git":
			return fs.SkipDir
		}
		if seen++; seen > maxWalkEntries {
			truncated = true
			return fs.SkipAll
		}
		under := p
		if base != "." {
			under = p[len(base)+1:]
		}
		if fn(p, under, d) {
			return fs.SkipAll
		}
		return nil
	})
	return truncated, err
}

func walkFailure(ctx context.Context, verb, p string, err error) Result {
	if ctx.Err() != nil {
		return toolErrorf("The %s was cancelled because the run ended.", verb)
	}
	return fsFailure(verb, p, err)
}

// globPattern is a parsed find or grep glob: alternatives (from brace
// expansion), each a list of path segments where "**" stands for any
// number of them.
type globPattern struct{ alts [][]string }

func parseGlob(pattern string) (globPattern, error) {
	pattern = strings.TrimSpace(pattern)
	alts, err := expandBraces(pattern)
	if err != nil {
		return globPattern{}, err
	}
	var g globPattern
	for _, alt := range alts {
		if strings.HasPrefix(alt, "/") {
			return globPattern{}, fmt.Errorf("pattern %q is absolute; patterns are relative to path (e.g. **/*.go)", pattern)
		}
		var segs []string
		for _, s := range strings.Split(alt, "/") {
			switch {
			case s == "" || s == ".":
				continue
			case s == "..":
				return globPattern{}, fmt.Errorf("pattern %q climbs out with ..; set path instead", pattern)
			case s == "**" && len(segs) > 0 && segs[len(segs)-1] == "**":
				continue
			case s != "**":
				if _, err := path.Match(s, ""); err != nil {
					return globPattern{}, fmt.Errorf("pattern %q is not a valid glob (check its [ ] classes and \\ escapes)", pattern)
				}
			}
			segs = append(segs, s)
		}
		if len(segs) == 0 {
			return globPattern{}, fmt.Errorf("pattern %q matches nothing; try **/* for every file", pattern)
		}
		if len(segs) == 1 && segs[0] != "**" && !strings.Contains(alt, "/") {
			segs = []string{"**", segs[0]} // a bare name matches at any depth
		}
		g.alts = append(g.alts, segs)
	}
	return g, nil
}

// match reports whether the slash-separated path p matches.
func (g globPattern) match(p string) bool {
	name := strings.Split(p, "/")
	for _, alt := range g.alts {
		if matchSegments(alt, name) {
			return true
		}
	}
	return false
}

// matchSegments matches pattern segments against path segments. It is
// memoized, so patterns with several ** stay linear in the path length
// times the pattern length.
func matchSegments(pat, name []string) bool {
	w := len(name) + 1
	memo := make([]int8, (len(pat)+1)*w)
	var m func(i, j int) bool
	m = func(i, j int) bool {
		if v := memo[i*w+j]; v != 0 {
			return v > 0
		}
		var ok bool
		switch {
		case i == len(pat):
			ok = j == len(name)
		case pat[i] == "**":
			ok = m(i+1, j) || j < len(name) && m(i, j+1)
		case j < len(name):
			matched, _ := path.Match(pat[i], name[j])
			ok = matched && m(i+1, j+1)
		}
		memo[i*w+j] = -1
		if ok {
			memo[i*w+j] = 1
		}
		return ok
	}
	return m(0, 0)
}

// expandBraces expands {a,b} alternatives, nested ones included. A brace
// without its partner is literal.
func expandBraces(p string) ([]string, error) {
	open := strings.IndexByte(p, '{')
	if open < 0 {
		return []string{p}, nil
	}
	depth, closing := 0, -1
	var commas []int
	for i := open; i < len(p) && closing < 0; i++ {
		switch p[i] {
		case '{':
			depth++
		case '}':
			if depth--; depth == 0 {
				closing = i
			}
		case ',':
			if depth == 1 {
				commas = append(commas, i)
			}
		}
	}
	if closing < 0 {
		return []string{p}, nil
	}
	var out []string
	start := open + 1
	for _, end := range append(commas, closing) {
		more, err := expandBraces(p[:open] + p[start:end] + p[closing+1:])
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
		if len(out) > maxGlobAlternatives {
			return nil, fmt.Errorf("pattern %q expands to more than %d alternatives", p, maxGlobAlternatives)
		}
		start = end + 1
	}
	return out, nil
}
