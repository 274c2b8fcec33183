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
		"memload.json": `[{"runs":100,"idleRssKiB":27750,"loadRssKiB":37068,"perRunKiB":93.2,"allFirstEventsMs":1129}]`,
		"memload.txt":  "  100 runs: …",
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
		"| 100 | 27.1 MiB | 36.2 MiB | **93.2 KiB** | 1.13 s |",
		`"Benchmark 2: memory per concurrent streaming run", "Results"`,
		"1  sequential  1.277  0.415  3.08",
		"*scaleout: skipped: HAProxy is not installed*",
		"*steploop-20: not run in this invocation*",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	if err := write(&b, t.TempDir()); err == nil {
		t.Error("a directory without steps.tsv was summarised")
	}
}
