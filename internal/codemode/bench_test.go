//go:build unix

package codemode

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"modernc.org/quickjs"
)

// benchPayload is what the benchmark's tool returns, on this side and on
// Node's (bench/codemode/vm.mjs).
const benchPayload = `{"ok":true,"n":1,"items":["a","b","c"]}`

// BenchmarkRun100Calls measures a script that makes 100 tool calls, with a
// Caller that answers at once: the sandbox and the call plumbing, no
// network. The scripts are bench/codemode/*.js, which bench/codemode.sh also
// runs in Node's node:vm for comparison.
//
// The warm variants give Run a Warm, as runnel serve does: the sandbox was
// built before the script asked for it, and taking it starts building the
// next one in the background while the script runs. Before each run the
// benchmark waits, untimed, until the next one is ready, as it is between a
// model's scripts, which come seconds apart. The cold variants build the
// sandbox in Run, as without a Warm. Each reports, besides ns/op (which
// includes those waits), the two figures to compare:
//
//   - ns/run: what a caller of Run waits for (for warm: taking the sandbox
//     ready, the script, closing the sandbox);
//   - cpu-ns/run: the CPU time of the whole process per run, the refills
//     and the garbage collector included: what the host pays.
func BenchmarkRun100Calls(b *testing.B) {
	tools := []Tool{{Server: "bench", Name: "echo"}}
	caller := CallerFunc(func(context.Context, string, string, json.RawMessage) (CallResult, error) {
		return CallResult{Content: benchPayload}, nil
	})
	for _, name := range []string{"sequential", "parallel"} {
		script, err := os.ReadFile(filepath.Join("..", "..", "bench", "codemode", name+".js"))
		if err != nil {
			b.Fatal(err)
		}
		for _, warm := range []bool{true, false} {
			label := name
			if !warm {
				label = "cold-" + name
			}
			b.Run(label, func(b *testing.B) {
				opts := &Options{}
				if warm {
					opts.Warm = NewWarm(nil)
					defer opts.Warm.Close()
				}
				benchRuns(b, opts, func() {
					out := Run(context.Background(), string(script), tools, caller, opts)
					if out.Error != "" || strings.TrimSpace(string(out.Result)) != "100" {
						b.Fatalf("got %+v", out)
					}
				})
			})
		}
	}
}

// BenchmarkRunEmpty is the fixed cost of a sandbox: a script that returns,
// in a sandbox built for it (cold) and in one a Warm had ready (warm).
func BenchmarkRunEmpty(b *testing.B) {
	for _, warm := range []bool{false, true} {
		name := "cold"
		if warm {
			name = "warm"
		}
		b.Run(name, func(b *testing.B) {
			opts := &Options{}
			if warm {
				opts.Warm = NewWarm(nil)
				defer opts.Warm.Close()
			}
			benchRuns(b, opts, func() {
				if out := Run(context.Background(), "return 1", nil, nil, opts); out.Error != "" {
					b.Fatalf("got %+v", out)
				}
			})
		})
	}
}

// benchRuns times run as a caller waits for it, first waiting, untimed, for
// opts.Warm to have its sandbox ready, and reports ns/run and cpu-ns/run.
func benchRuns(b *testing.B, opts *Options, run func()) {
	var waited time.Duration
	cpu := cpuTime(b)
	start := time.Now()
	n := 0
	for b.Loop() {
		if opts.Warm != nil {
			t := time.Now()
			opts.Warm.awaitReady(b)
			waited += time.Since(t)
		}
		run()
		n++
	}
	b.ReportMetric(float64(time.Since(start)-waited)/float64(n), "ns/run")
	b.ReportMetric(float64(cpuTime(b)-cpu)/float64(n), "cpu-ns/run")
}

// cpuTime is the CPU time of the process so far, user and system.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkEngineFloor is the JavaScript the sequential script makes
// QuickJS do per call when nothing crosses into Go: stringify the
// arguments, parse the payload, await a promise, 100 times, in one VM. It
// is the floor under BenchmarkRun100Calls/sequential that no change to the
// plumbing can go below (docs/benchmarks.md, "Code mode").
func BenchmarkEngineFloor(b *testing.B) {
	vm, err := quickjs.NewVM()
	if err != nil {
		b.Fatal(err)
	}
	defer vm.Close()
	script := `(async () => {
	let n = 0;
	for (let i = 0; i < 100; i++) {
		JSON.stringify({i, query: "hello"});
		n += await Promise.resolve(JSON.parse(` + "`" + benchPayload + "`" + `)).n;
	}
	if (n !== 100) throw new Error("got " + n);
})()`
	bytecode, err := vm.Compile(script, quickjs.EvalGlobal)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		promise, err := vm.EvalBytecodeValue(bytecode)
		if err != nil {
			b.Fatal(err)
		}
		promise.Free()
		if _, err := vm.ExecutePendingJobs(); err != nil {
			b.Fatal(err)
		}
	}
}
