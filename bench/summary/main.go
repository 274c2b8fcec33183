// Command summary writes summary.md for a results directory of
// bench/all.sh: every figure of the invocation, grouped by the section of
// docs/benchmarks.md it belongs to, as tables where the docs have tables
// (benchmark 1's step loop, benchmark 2's memory and the footprint) and as
// the drivers' own printed output elsewhere. It reads what all.sh wrote:
// meta.env, steps.tsv, and per step NAME.json and NAME.txt.
//
//	go run ./bench/summary -dir bench/results/2026-11-25T10-00-00
//	go run ./bench/summary -dir DIR -docs docs/benchmarks.md
//
// With -docs it also puts the same figures into that file, between the
// lines docsBegin and docsEnd (the section "The latest figures"), and
// changes nothing else in it: bench/all.sh does so after a full run of
// every step. The sections around it tell how each benchmark works and
// what earlier runs found.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	dir := flag.String("dir", "", "results directory written by bench/all.sh (required)")
	docs := flag.String("docs", "", "also write the figures into this `file` (docs/benchmarks.md), between its generated-section markers")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "summary: -dir is required")
		os.Exit(2)
	}
	var b bytes.Buffer
	if err := write(&b, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "summary:", err)
		os.Exit(1)
	}
	out := filepath.Join(*dir, "summary.md")
	if err := os.WriteFile(out, b.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "summary:", err)
		os.Exit(1)
	}
	fmt.Println(out)
	if *docs != "" {
		if err := intoDocs(*docs, b.Bytes()); err != nil {
			fmt.Fprintln(os.Stderr, "summary:", err)
			os.Exit(1)
		}
		fmt.Println(*docs)
	}
}

// The lines that enclose the generated section of docs/benchmarks.md.
const (
	docsBegin = "<!-- begin: written by bench/all.sh (bench/summary -docs); edits between these lines are overwritten -->"
	docsEnd   = "<!-- end: written by bench/all.sh -->"
)

// intoDocs replaces what lies between docsBegin and docsEnd in the file
// at path with summary, its headings two levels down (the file's own
// heading of the section is "##", so the summary's title becomes "###"). A file without both markers, in that
// order, is left alone and is an error.
func intoDocs(path string, summary []byte) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	i, j := bytes.Index(doc, []byte(docsBegin)), bytes.Index(doc, []byte(docsEnd))
	if i < 0 || j < i {
		return fmt.Errorf("%s has no generated section (the lines %q and %q)", path, docsBegin, docsEnd)
	}
	var b bytes.Buffer
	b.Write(doc[:i+len(docsBegin)])
	b.WriteString("\n\n")
	for line := range bytes.Lines(summary) {
		if bytes.HasPrefix(line, []byte("#")) {
			b.WriteString("##")
		}
		b.Write(line)
	}
	b.WriteString("\n")
	b.Write(doc[j:])
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// step is one line of steps.tsv: a driver invocation and how it ended.
type step struct {
	name, status, seconds, note string
}

// results is a results directory.
type results struct {
	dir   string
	meta  map[string]string
	steps map[string]step
	order []string
}

func load(dir string) (*results, error) {
	r := &results{dir: dir, meta: map[string]string{}, steps: map[string]step{}}
	if raw, err := os.ReadFile(filepath.Join(dir, "meta.env")); err == nil {
		for line := range strings.SplitSeq(string(raw), "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				r.meta[k] = v
			}
		}
	}
	raw, err := os.ReadFile(filepath.Join(dir, "steps.tsv"))
	if err != nil {
		return nil, fmt.Errorf("not a results directory of bench/all.sh: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), "\t", 4)
		if len(f) < 3 {
			continue
		}
		s := step{name: f[0], status: f[1], seconds: f[2]}
		if len(f) == 4 {
			s.note = f[3]
		}
		if _, seen := r.steps[s.name]; !seen {
			r.order = append(r.order, s.name)
		}
		r.steps[s.name] = s
	}
	return r, nil
}

// json decodes NAME.json into v; false when the step wrote none.
func (r *results) json(name string, v any) (bool, error) {
	raw, err := os.ReadFile(filepath.Join(r.dir, name+".json"))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return false, fmt.Errorf("%s.json: %w", name, err)
	}
	return true, nil
}

// text is NAME.txt, the step's printed output.
func (r *results) text(name string) string {
	raw, _ := os.ReadFile(filepath.Join(r.dir, name+".txt"))
	return strings.TrimRight(string(raw), "\n")
}

// status says how a step ended, for a line under its heading; "" when it
// ran and wrote its results.
func (r *results) status(name string) string {
	s, ok := r.steps[name]
	switch {
	case !ok:
		return "not run in this invocation"
	case s.status == "ok":
		return ""
	case s.note != "":
		return s.status + ": " + s.note
	}
	return s.status
}

func write(b *bytes.Buffer, dir string) error {
	r, err := load(dir)
	if err != nil {
		return err
	}
	m := r.meta
	fmt.Fprintf(b, "# Benchmark results, %s\n\n", m["date"])
	fmt.Fprintf(b, "Generated by `bash bench/all.sh %s` (then `go run ./bench/summary`); raw results are the `*.json` and `*.txt` files beside this one.\n", m["args"])
	b.WriteString("Each heading names the section of `docs/benchmarks.md` its figures belong to. Every figure comes from this one\n")
	b.WriteString("invocation, each contestant beside its peers, so compare within a table, not across invocations.\n\n")
	b.WriteString("| | |\n|---|---|\n")
	for _, k := range []string{"commit", "mode", "cpu", "cpus", "mem", "kernel", "go", "node", "aisdk", "netns", "load_start", "load_end", "duration_s"} {
		if v := m[k]; v != "" {
			fmt.Fprintf(b, "| %s | %s |\n", k, strings.ReplaceAll(v, "|", "\\|"))
		}
	}
	b.WriteString("\nSteps:\n\n| step | status | seconds | note |\n|---|---|---|---|\n")
	for _, n := range r.order {
		s := r.steps[n]
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", s.name, s.status, s.seconds, s.note)
	}
	b.WriteString("\n")
	for _, sec := range []func(*bytes.Buffer, *results) error{
		footprintSection, steploopSection, gobenchSection, memloadSection,
		printedSection(`ACP harnesses → docs/benchmarks.md, "Benchmark 3: ACP harnesses" ("Results: a tool round trip"; "Results: time to first text" when agents are installed)`,
			"", "acp"),
		printedSection(`Isolated sandbox → docs/benchmarks.md, "Benchmark 4: the isolated sandbox against local", "Results"`,
			"", "sandbox", "sandbox-agents"),
		printedSection(`Scale-out → docs/benchmarks.md, "Benchmark 5: scale-out behind a load balancer", "Results"`, "", "scaleout"),
		printedSection(`Code mode → docs/benchmarks.md, "Code mode", "Results"`,
			"Wall and CPU time per run, runnel against node:vm, with both ratios (bench/codemode.sh).", "codemode"),
		printedSection(`Soak → docs/benchmarks.md, "Benchmark 7: soak"`, "", "soak"),
	} {
		if err := sec(b, r); err != nil {
			return err
		}
	}
	return nil
}

// verbatim writes a step's printed output as a code block, or its status.
func verbatim(b *bytes.Buffer, r *results, name string) {
	if st := r.status(name); st != "" {
		fmt.Fprintf(b, "*%s: %s*\n\n", name, st)
	}
	if t := r.text(name); t != "" {
		fmt.Fprintf(b, "`%s.txt`:\n\n```\n%s\n```\n\n", name, t)
	}
}
