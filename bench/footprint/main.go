// Command footprint measures what runnel costs before it does anything:
// the size of its binary, built plainly and stripped, and the memory of an
// idle `runnel serve` right after start-up and after some runs
// (docs/benchmarks.md: the binary size and idle VmRSS of benchmark 2).
//
// For each binary, in one invocation, it starts `runnel serve` on
// 127.0.0.1, waits -settle, reads VmRSS (after start-up), makes -runs
// streaming runs one after another (each a callback tool call, then a text
// answer, from a fake model in this process that records nothing), waits
// -settle, and reads VmRSS and VmHWM again (after the runs). Wall time and
// runnel's CPU time per run are beside them, and every figure of the
// stripped binary is also given as a ratio to the plain one's.
//
//	go build -o /tmp/runnel ./cmd/runnel
//	go build -trimpath -ldflags='-s -w' -o /tmp/runnel-stripped ./cmd/runnel
//	go run ./bench/footprint -plain /tmp/runnel -stripped /tmp/runnel-stripped
//
// bench/footprint.sh does exactly that.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/runnel/runnel/bench/internal/benchkit"
	"github.com/runnel/runnel/internal/llmtest"
)

type config struct {
	plain, stripped string
	runs            int
	settle, timeout time.Duration
	jsonOut         string
}

func main() {
	var cfg config
	flag.StringVar(&cfg.plain, "plain", "", "runnel built with `go build ./cmd/runnel` (required)")
	flag.StringVar(&cfg.stripped, "stripped", "", "runnel built with `go build -trimpath -ldflags='-s -w' ./cmd/runnel` (optional)")
	flag.IntVar(&cfg.runs, "runs", 100, "runs, one after another, before the second reading")
	flag.DurationVar(&cfg.settle, "settle", 2*time.Second, "wait before each reading")
	flag.DurationVar(&cfg.timeout, "timeout", 3*time.Minute, "give up after this long")
	flag.StringVar(&cfg.jsonOut, "json", "", "also write the results as JSON to this file")
	flag.Parse()
	if cfg.plain == "" || cfg.runs < 0 {
		fmt.Fprintln(os.Stderr, "footprint: -plain BIN is required and -runs must not be negative")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	if err := bench(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "footprint:", err)
		os.Exit(1)
	}
}

// report is what the driver prints, and writes with -json.
type report struct {
	GoVersion string   `json:"goVersion"` // the driver's; build runnel with the same
	Runs      int      `json:"runs"`
	Binaries  []binary `json:"binaries"`
	// Stripped is the stripped binary's figures over the plain one's.
	Stripped *ratios `json:"strippedOverPlain,omitempty"`
}

// binary is one build's figures.
type binary struct {
	Name      string  `json:"name"`
	Path      string  `json:"path"`
	SizeBytes int64   `json:"sizeBytes"`
	SizeMiB   float64 `json:"sizeMiB"`
	// StartRSSKiB is VmRSS after start-up and -settle, before any run.
	StartRSSKiB int64 `json:"startRssKiB"`
	// RunsRSSKiB is VmRSS -settle after the last of the runs; HWMKiB the
	// peak over the process's life.
	RunsRSSKiB int64   `json:"afterRunsRssKiB"`
	HWMKiB     int64   `json:"hwmKiB"`
	Threads    int     `json:"threadsAfterRuns"`
	RunWallMs  float64 `json:"medianRunWallMs"`
	RunCPUMs   float64 `json:"runCpuMs"` // runnel's own CPU per run, its threads' run time
}

type ratios struct {
	Size     float64 `json:"size"`
	StartRSS float64 `json:"startRss"`
	RunsRSS  float64 `json:"afterRunsRss"`
	RunWall  float64 `json:"runWall"`
	RunCPU   float64 `json:"runCpu"`
}

func bench(ctx context.Context, cfg config) error {
	model, err := benchkit.ServeModel(script())
	if err != nil {
		return err
	}
	defer model.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	cb := &http.Server{Handler: benchkit.CallbackHandler(toolName, toolOutput), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() { defer close(served); _ = cb.Serve(ln) }()
	defer func() { _ = cb.Close(); <-served }()
	body, err := runBody(model.URL+"/v1", "http://"+ln.Addr().String()+"/tools/call")
	if err != nil {
		return err
	}

	rep := &report{GoVersion: runtime.Version(), Runs: cfg.runs}
	builds := []struct{ name, path string }{{"plain (go build)", cfg.plain}}
	if cfg.stripped != "" {
		builds = append(builds, struct{ name, path string }{"stripped (-trimpath -ldflags='-s -w')", cfg.stripped})
	}
	for _, b := range builds {
		row, err := measure(ctx, cfg, b.name, b.path, body)
		if err != nil {
			return fmt.Errorf("%s: %w", b.name, err)
		}
		rep.Binaries = append(rep.Binaries, row)
	}
	if len(rep.Binaries) == 2 {
		p, s := rep.Binaries[0], rep.Binaries[1]
		rep.Stripped = &ratios{
			Size:     float64(s.SizeBytes) / float64(p.SizeBytes),
			StartRSS: float64(s.StartRSSKiB) / float64(p.StartRSSKiB),
			RunsRSS:  float64(s.RunsRSSKiB) / float64(p.RunsRSSKiB),
			RunWall:  s.RunWallMs / p.RunWallMs,
			RunCPU:   s.RunCPUMs / p.RunCPUMs,
		}
	}
	rep.print(os.Stdout)
	if cfg.jsonOut != "" {
		return benchkit.WriteJSON(cfg.jsonOut, rep)
	}
	return nil
}

// measure is one binary's size and memory.
func measure(ctx context.Context, cfg config, name, path string, body []byte) (binary, error) {
	st, err := os.Stat(path)
	if err != nil {
		return binary{}, err
	}
	row := binary{Name: name, Path: path, SizeBytes: st.Size(), SizeMiB: float64(st.Size()) / (1 << 20)}
	srv, err := benchkit.StartRunnel(ctx, path, append(os.Environ(), "RUNNEL_TOKEN=", "RUNNEL_TOKEN_FILE="))
	if err != nil {
		return row, err
	}
	defer srv.Close()
	if err := benchkit.Sleep(ctx, cfg.settle); err != nil {
		return row, err
	}
	start, err := benchkit.ReadStatus(srv.PID())
	if err != nil {
		return row, err
	}
	row.StartRSSKiB = start.RSSKiB

	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	cpu0, err := benchkit.ReadThreadsCPU(srv.PID())
	if err != nil {
		return row, err
	}
	walls := make([]time.Duration, 0, cfg.runs)
	for i := range cfg.runs {
		t0 := time.Now()
		if err := oneRun(ctx, client, srv.URL, body); err != nil {
			return row, fmt.Errorf("run %d: %w", i+1, err)
		}
		walls = append(walls, time.Since(t0))
	}
	cpu1, err := benchkit.ReadThreadsCPU(srv.PID())
	if err != nil {
		return row, err
	}
	client.CloseIdleConnections() // idle means no client connection either
	if err := benchkit.Sleep(ctx, cfg.settle); err != nil {
		return row, err
	}
	after, err := benchkit.ReadStatus(srv.PID())
	if err != nil {
		return row, err
	}
	row.RunsRSSKiB, row.HWMKiB, row.Threads = after.RSSKiB, after.HWMKiB, after.Threads
	row.RunWallMs = float64(benchkit.Median(walls)) / float64(time.Millisecond)
	if cfg.runs > 0 {
		row.RunCPUMs = float64(cpu1-cpu0) / float64(time.Millisecond) / float64(cfg.runs)
	}
	return row, nil
}

// The run every reading follows: one callback tool call, then text.
const (
	toolName   = "lookup"
	toolOutput = "42"
	finalText  = "The answer is 42."
)

func script() llmtest.Script {
	return llmtest.Script{Rules: []llmtest.Rule{
		{Name: "answer", When: llmtest.Match{LastRole: llmtest.RoleTool}, Reply: llmtest.Reply{Text: finalText}},
		{Name: "call", Reply: llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: toolName, Arguments: json.RawMessage(`{"q":"answer"}`)}}}},
	}}
}

func runBody(modelURL, callbackURL string) ([]byte, error) {
	return json.Marshal(map[string]any{
		"model":        "openai/bench-model",
		"endpoint":     map[string]string{"baseUrl": modelURL},
		"secrets":      map[string]string{"OPENAI_API_KEY": "sk-bench-0123456789abcdef0123456789abcdef"},
		"tools":        []string{},
		"permissions":  map[string]string{"default": "allow"},
		"messages":     []map[string]string{{"role": "user", "content": "What is the answer?"}},
		"customTools":  []map[string]any{{"name": toolName, "description": "Look it up.", "callRef": toolName, "inputSchema": json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}},
		"toolCallback": map[string]string{"endpoint": callbackURL},
	})
}

// oneRun is one streaming POST /run read to its result record, which must
// say the run completed with the scripted answer.
func oneRun(ctx context.Context, client *http.Client, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/run", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("POST /run: HTTP %d: %s", resp.StatusCode, msg)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	for sc.Scan() {
		var rec struct {
			Kind   string `json:"kind"`
			Result *struct {
				Status string `json:"status"`
				Output string `json:"output"`
				Error  string `json:"error"`
			} `json:"result"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) != nil || rec.Kind != "result" || rec.Result == nil {
			continue
		}
		if rec.Result.Status != "completed" || rec.Result.Output != finalText {
			return fmt.Errorf("run ended %s with %q (error: %s)", rec.Result.Status, rec.Result.Output, rec.Result.Error)
		}
		return nil
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return errors.New("the stream ended without a result record")
}

func (rep *report) print(w io.Writer) {
	fmt.Fprintf(w, "footprint: %d runs between the readings (driver built with %s)\n", rep.Runs, rep.GoVersion)
	fmt.Fprintf(w, "%-40s %10s %14s %16s %10s %12s %12s\n", "binary", "size", "VmRSS start", "VmRSS after runs", "VmHWM", "run (median)", "CPU/run")
	for _, b := range rep.Binaries {
		fmt.Fprintf(w, "%-40s %7.2f MiB %10.1f MiB %12.1f MiB %6.1f MiB %9.2f ms %9.2f ms\n", b.Name, b.SizeMiB,
			float64(b.StartRSSKiB)/1024, float64(b.RunsRSSKiB)/1024, float64(b.HWMKiB)/1024, b.RunWallMs, b.RunCPUMs)
	}
	if r := rep.Stripped; r != nil {
		fmt.Fprintf(w, "stripped / plain: size %.2f, VmRSS start %.2f, after runs %.2f, run wall %.2f, CPU %.2f\n",
			r.Size, r.StartRSS, r.RunsRSS, r.RunWall, r.RunCPU)
	}
}
