package main

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestFakesClose starts the fakes and stops them: close must leave no
// goroutine behind (TestMain checks), or a soak's own count would drift.
func TestFakesClose(t *testing.T) {
	f, err := startFakes(paceDelays(0, 0, 2))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{f.modelURL, f.callbackURL, f.mcpURL} {
		if !strings.HasPrefix(u, "http://127.0.0.1:") {
			t.Errorf("fake at %s, want loopback", u)
		}
	}
	f.close()
}

func TestFitLine(t *testing.T) {
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	// y = 100 + 2x exactly: slope 2, no error.
	f := fitLine([]float64{0, 1, 2, 3, 4}, []float64{100, 102, 104, 106, 108})
	if !near(f.Slope, 2) || !near(f.Intercept, 100) || !near(f.SlopeErr, 0) || !near(f.Mean, 104) || f.Min != 100 || f.Max != 108 {
		t.Errorf("exact line: %+v", f)
	}
	// 2 % of the mean of 104 over 10 units of x: 2·10/104·100.
	if got, want := f.percentPer(10), 2*10/104.0*100; !near(got, want) {
		t.Errorf("percentPer(10) = %v, want %v", got, want)
	}
	// Flat with noise: slope 0, a standard error above 0.
	f = fitLine([]float64{0, 1, 2, 3}, []float64{10, 12, 12, 10})
	if !near(f.Slope, 0) || f.SlopeErr <= 0 {
		t.Errorf("flat noisy: %+v", f)
	}
	// Hand-computed: x 1,2,3; y 1,3,2 → slope 0.5, residuals ±0.5 and -1,
	// sse 1.5, se = sqrt(1.5/1/2).
	f = fitLine([]float64{1, 2, 3}, []float64{1, 3, 2})
	if !near(f.Slope, 0.5) || !near(f.Intercept, 1) || !near(f.SlopeErr, math.Sqrt(0.75)) {
		t.Errorf("three points: %+v", f)
	}
	for _, c := range []struct {
		name   string
		xs, ys []float64
	}{
		{"none", nil, nil},
		{"one", []float64{5}, []float64{7}},
		{"same x", []float64{2, 2, 2}, []float64{1, 2, 3}},
	} {
		f := fitLine(c.xs, c.ys)
		if f.Slope != 0 || f.SlopeErr != 0 || math.IsNaN(f.Mean) {
			t.Errorf("%s: %+v, want slope 0", c.name, f)
		}
	}
	if (fit{}).percentPer(10) != 0 {
		t.Error("percentPer with a zero mean is not 0")
	}
}

func TestPaceDelays(t *testing.T) {
	got := paceDelays(60*time.Millisecond, 240*time.Millisecond, 4)
	want := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 30 * time.Millisecond, 40 * time.Millisecond}
	if !slices.Equal(got, want) {
		t.Errorf("paceDelays = %v, want %v", got, want)
	}
	if got := paceDelays(60*time.Millisecond, 240*time.Millisecond, 1); !slices.Equal(got, want[:1]) {
		t.Errorf("one pace = %v, want %v", got, want[:1])
	}
}

func TestParseMix(t *testing.T) {
	got, err := parseMix("callback=2,direct=1,mcp=1")
	if want := []string{"callback", "direct", "mcp", "callback"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("parseMix = %v, %v; want %v", got, err, want)
	}
	got, err = parseMix("mcp")
	if err != nil || !slices.Equal(got, []string{"mcp"}) {
		t.Errorf("parseMix(mcp) = %v, %v", got, err)
	}
	for _, bad := range []string{"shell=1", "callback=x", "callback=0", "callback=-1"} {
		if _, err := parseMix(bad); err == nil {
			t.Errorf("parseMix(%q) succeeded", bad)
		}
	}
}

func TestParseMetrics(t *testing.T) {
	text := "# HELP go_goroutines Number of goroutines.\n# TYPE go_goroutines gauge\ngo_goroutines 1234\n" +
		"runnel_runs_total{harness=\"native\",status=\"completed\"} 9\nrunnel_active_runs 17\ngo_memstats_heap_inuse_bytes 4.194304e+06\n"
	m, err := parseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if m["go_goroutines"] != 1234 || m["runnel_active_runs"] != 17 || m["go_memstats_heap_inuse_bytes"] != 4194304 {
		t.Errorf("parseMetrics = %v", m)
	}
	if _, ok := m["runnel_runs_total"]; ok {
		t.Error("a labelled series was read as unlabelled")
	}
}

func TestParseTimeWait(t *testing.T) {
	n, err := parseTimeWait("sockets: used 300\nTCP: inuse 25 orphan 0 tw 4711 alloc 30 mem 5\nUDP: inuse 3 mem 1\n")
	if err != nil || n != 4711 {
		t.Errorf("parseTimeWait = %d, %v; want 4711", n, err)
	}
	if _, err := parseTimeWait("UDP: inuse 3\n"); err == nil {
		t.Error("a sockstat without TCP parsed")
	}
}

// TestCheck runs the stream checks on records as runnel writes them.
func TestCheck(t *testing.T) {
	const id = "call_abc00"
	good := []string{
		`{"kind":"event","event":{"type":"message_start","id":"m1"}}`,
		`{"kind":"event","event":{"type":"tool_call","id":"` + id + `","name":"lookup","input":{"query":"soak"}}}`,
		`{"kind":"event","event":{"type":"tool_result","id":"` + id + `","output":"` + callbackOutput(id) + `"}}`,
		`{"kind":"event","event":{"type":"message_delta","id":"m2","delta":"Done: "}}`,
		`{"kind":"event","event":{"type":"done","stopReason":"end_turn"}}`,
		`{"kind":"result","result":{"ok":true,"status":"completed","output":"` + answerPrefix + callbackOutput(id) + `","stopReason":"end_turn"}}`,
	}
	errEvent := `{"kind":"event","event":{"type":"error","message":"boom","code":"provider_error"}}`
	for _, c := range []struct {
		name       string
		lines      []string
		executions int
		wantKind   string // "" for a good run
	}{
		{"good", good, 1, ""},
		{"ran twice", good, 2, "tool executions"},
		{"never ran", good, 0, "tool executions"},
		{"error event", append(slices.Clone(good[:2]), errEvent), 1, "error event"},
		{"no result", good[:5], 1, "no result"},
		{"record after result", append(slices.Clone(good), good[0]), 1, "records after result"},
		{"no done", append(slices.Clone(good[:4]), good[5]), 1, "done event"},
		{"wrong text", append(slices.Clone(good[:5]), `{"kind":"result","result":{"ok":true,"status":"completed","output":"Done: something else"}}`), 1, "final text"},
		{"failed", append(slices.Clone(good[:2]), `{"kind":"result","result":{"ok":false,"status":"failed","error":"x","errorCode":"provider_error"}}`), 1, "result failed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakes{platform: newPlatform()}
			for range c.executions {
				f.platform.count(id)
			}
			cl := &client{fakes: f}
			var s seen
			s.resultOK = true
			for _, l := range c.lines {
				if err := s.add([]byte(l)); err != nil {
					t.Fatalf("add(%s): %v", l, err)
				}
			}
			err := cl.check(plan{kind: kindCallback}, &s)
			switch {
			case c.wantKind == "" && err != nil:
				t.Errorf("check = %v, want a good run", err)
			case c.wantKind != "" && (err == nil || err.kind != c.wantKind):
				t.Errorf("check = %v, want kind %q", err, c.wantKind)
			}
		})
	}
}

func TestParseHostCPU(t *testing.T) {
	h, err := parseProcStat("cpu  100 5 50 1000 20 3 2 7 0 0\ncpu0 50 2 25 500 10 1 1 3 0 0\n")
	want := hostCPU{BusyMs: (100 + 5 + 50) * 10, IRQMs: (3 + 2) * 10, IdleMs: (1000 + 20) * 10, StealMs: 70}
	if err != nil || h != want {
		t.Errorf("parseProcStat = %+v, %v; want %+v", h, err, want)
	}
	if _, err := parseProcStat("intr 1 2 3\n"); err == nil {
		t.Error("a /proc/stat without its cpu line parsed")
	}
	psi := "some avg10=1.01 avg60=28.56 avg300=66.79 total=6852267710\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
	if got := parsePressure(psi); got != 6852267710 {
		t.Errorf("parsePressure = %d", got)
	}
}

func TestSlowest(t *testing.T) {
	mk := func(at float64, done int64, serveMs, driverMs, busyMs int64) sample {
		return sample{At: at, Completed: done, ServeCPUMs: serveMs, DriverCPUMs: driverMs,
			Host: hostCPU{BusyMs: busyMs, PressureUs: int64(at * 5e5)}}
	}
	samples := []sample{
		mk(0, 0, 0, 0, 0),
		mk(10, 1000, 8000, 6000, 18000), // 100 runs/s
		mk(20, 1100, 9000, 7000, 38000), // 10 runs/s: others took 1.8 cores
		mk(30, 3000, 17000, 13000, 56000),
	}
	in, ok := slowest(samples, 5)
	if !ok || in.From != 10 || in.To != 20 || in.RunsPerS != 10 {
		t.Fatalf("slowest = %+v, %v; want 10–20 s at 10 runs/s", in, ok)
	}
	near := func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
	if !near(in.Serve, 0.1) || !near(in.Driver, 0.1) || !near(in.Others, 1.8) || !near(in.Pressure, 0.5) {
		t.Errorf("CPU split %+v, want runnel 0.1, driver 0.1, others 1.8 cores, pressure 0.5", in)
	}
	// The first interval starts before `after`: left out.
	if in, _ := slowest(samples[:2], 5); in.RunsPerS != 0 || in.To != 0 {
		t.Errorf("slowest of an interval before `after` = %+v", in)
	}
}
