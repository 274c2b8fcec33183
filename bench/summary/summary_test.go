package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWrite builds summary.md from a small results directory: a step that
// ran with its JSON, one that printed only text, one that was skipped.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"meta.env":     "date=2026-11-25T10:00:00Z\nmode=quick\ncpus=2\n",
		"steps.tsv":    "memload\tok\t6\t\ncodemode\tok\t2\t\nscaleout\tskipped\t0\tHAProxy is not installed\n",
		"memload.json": `[{"upstream":"h2","requestKiB":0.2,"runs":100,"idleRssKiB":27750,"loadRssKiB":37068,"perRunKiB":93.2,"allFirstEventsMs":1129}]`,
		"memload.txt":  "  100 runs: …",
		"steploop-20.json": `{"toolStepsPerTurn":20,"modelCallsPerTurn":21,"contestants":[{"name":"runnel serve (HTTP, NDJSON)","cpuStepUs":400},` +
			`{"name":"AI SDK streamText ai@7","cpuStepUs":2000},{"name":"floor (bare Go loop)","cpuStepUs":150}]}`,
		"codemode.txt": "round  script  runnel ms/run  node ms/run  ratio\n1  sequential  1.277  0.415  3.08",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	if err := write(&b, dir); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{
		"| h2 | 100 | 0.2 KiB | 27.1 MiB | 36.2 MiB | **93.2 KiB** | 466.0× | 1.13 s |",
		`"Benchmark 2: memory per concurrent streaming run", "Results"`,
		"1  sequential  1.277  0.415  3.08",
		"*scaleout: skipped: HAProxy is not installed*",
		"| AI SDK streamText ai@7 / runnel serve (HTTP, NDJSON) | **5.0×** (2000 µs / 400 µs) |",
		"*steploop-200: not run in this invocation*",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	if err := write(&b, t.TempDir()); err == nil {
		t.Error("a directory without steps.tsv was summarised")
	}
}

// TestIntoDocs replaces the generated section and nothing else, and
// refuses a file without one.
func TestIntoDocs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "benchmarks.md")
	before := "# Benchmarks\n\nintro\n\n## The latest figures\n\n" + docsBegin + "\nold figures\n" + docsEnd + "\n\n## Benchmark 1\n\nhow it works\n"
	if err := os.WriteFile(path, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := intoDocs(path, []byte("# Benchmark results\n\n## Step loop\n\n| a | b |\n")); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	want := "# Benchmarks\n\nintro\n\n## The latest figures\n\n" + docsBegin + "\n\n### Benchmark results\n\n#### Step loop\n\n| a | b |\n\n" + docsEnd + "\n\n## Benchmark 1\n\nhow it works\n"
	if string(got) != want {
		t.Errorf("docs after:\n%s\nwant:\n%s", got, want)
	}
	if err := os.WriteFile(path, []byte("# no markers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := intoDocs(path, []byte("x")); err == nil {
		t.Error("a file without the generated section was written")
	}
	if got, _ := os.ReadFile(path); string(got) != "# no markers\n" {
		t.Errorf("a refused file changed: %q", got)
	}
}
