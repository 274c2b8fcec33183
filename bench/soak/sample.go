package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/runnel/runnel/bench/internal/benchkit"
)

// sample is one reading of runnel serve and of the load.
type sample struct {
	// At is the time since the load started, in seconds.
	At      float64 `json:"t"`
	RSSKiB  int64   `json:"rssKiB"`
	FDs     int     `json:"fds"`
	Threads int     `json:"threads"`
	// From runnel's GET /metrics; -1 when it did not answer.
	Goroutines   int   `json:"goroutines"`
	HeapInuseKiB int64 `json:"heapInuseKiB"`
	HeapAllocKiB int64 `json:"heapAllocKiB"`
	// NextGCKiB is the heap size at which the next collection starts:
	// with GOGC=100 about twice what the last one found live, so its
	// trend is the live heap's, without the garbage RSS carries.
	NextGCKiB  int64 `json:"nextGCKiB"`
	GCs        int64 `json:"gcs"` // garbage collections so far
	ActiveRuns int   `json:"activeRuns"`
	// TimeWait is the host's TCP sockets in TIME_WAIT (/proc/net/sockstat,
	// every process's): connections opened and closed rather than reused.
	TimeWait  int   `json:"tcpTimeWait"`
	Completed int64 `json:"completed"` // runs finished so far
	Errors    int64 `json:"errors"`    // of which failed
	// Cumulative CPU in ms, to split each interval's CPU between runnel,
	// this driver and the rest of the host (the machine is shared), and
	// CPU stolen by the hypervisor.
	ServeCPUMs  int64   `json:"serveCPUMs"`
	DriverCPUMs int64   `json:"driverCPUMs"`
	Host        hostCPU `json:"host"`
}

// sampler reads runnel's /proc entries and /metrics.
type sampler struct {
	pid        int
	metricsURL string
	http       *http.Client
}

func newSampler(pid int, serveURL string) *sampler {
	// One connection of its own, kept: it is in every fd count alike.
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1}
	return &sampler{pid: pid, metricsURL: serveURL + "/metrics", http: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
}

func (s *sampler) close() { s.http.CloseIdleConnections() }

// read takes a sample; the load's counters are the caller's to fill.
func (s *sampler) read(ctx context.Context, at time.Duration) (sample, error) {
	st, err := benchkit.ReadStatus(s.pid)
	if err != nil {
		return sample{}, err
	}
	fds, err := countFDs(s.pid)
	if err != nil {
		return sample{}, err
	}
	smp := sample{At: at.Seconds(), RSSKiB: st.RSSKiB, Threads: st.Threads, FDs: fds,
		Goroutines: -1, ActiveRuns: -1, HeapInuseKiB: -1, HeapAllocKiB: -1, NextGCKiB: -1}
	if cpu, err := benchkit.ReadCPU(s.pid); err == nil {
		smp.ServeCPUMs = cpu.Self.Milliseconds()
	}
	if cpu, err := benchkit.ReadCPU(os.Getpid()); err == nil {
		smp.DriverCPUMs = cpu.Self.Milliseconds()
	}
	smp.Host, _ = readHostCPU()
	smp.TimeWait, _ = timeWait()
	if m, err := s.metrics(ctx); err == nil {
		get := func(name string) (float64, bool) { v, ok := m[name]; return v, ok }
		if v, ok := get("go_goroutines"); ok {
			smp.Goroutines = int(v)
		}
		if v, ok := get("go_memstats_heap_inuse_bytes"); ok {
			smp.HeapInuseKiB = int64(v) / 1024
		}
		if v, ok := get("go_memstats_heap_alloc_bytes"); ok {
			smp.HeapAllocKiB = int64(v) / 1024
		}
		if v, ok := get("go_memstats_next_gc_bytes"); ok {
			smp.NextGCKiB = int64(v) / 1024
		}
		if v, ok := get("go_gc_duration_seconds_count"); ok {
			smp.GCs = int64(v)
		}
		if v, ok := get("runnel_active_runs"); ok {
			smp.ActiveRuns = int(v)
		}
	}
	return smp, nil
}

// hostCPU is the host's CPU time so far from /proc/stat, in ms, every
// CPU together, and its CPU pressure (/proc/pressure/cpu "some": time
// in µs during which a runnable task waited for a CPU).
type hostCPU struct {
	BusyMs     int64 `json:"busyMs"`  // user, nice, system: processes
	IRQMs      int64 `json:"irqMs"`   // irq and softirq: loopback TCP, mostly
	IdleMs     int64 `json:"idleMs"`  // idle and iowait
	StealMs    int64 `json:"stealMs"` // taken by the hypervisor
	PressureUs int64 `json:"cpuPressureSomeUs"`
}

func readHostCPU() (hostCPU, error) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return hostCPU{}, err
	}
	h, err := parseProcStat(string(raw))
	if err != nil {
		return h, err
	}
	if psi, err := os.ReadFile("/proc/pressure/cpu"); err == nil {
		h.PressureUs = parsePressure(string(psi))
	}
	return h, nil
}

// parseProcStat reads the first line of /proc/stat, "cpu  user nice
// system idle iowait irq softirq steal …", in clock ticks of 10 ms.
func parseProcStat(stat string) (hostCPU, error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return hostCPU{}, fmt.Errorf("/proc/stat starts %.40q", line)
	}
	var v [8]int64
	for i := range v {
		n, err := strconv.ParseInt(f[1+i], 10, 64)
		if err != nil {
			return hostCPU{}, fmt.Errorf("/proc/stat: %w", err)
		}
		v[i] = n * 10 // ticksPerSecond is 100 on Linux
	}
	return hostCPU{BusyMs: v[0] + v[1] + v[2], IRQMs: v[5] + v[6], IdleMs: v[3] + v[4], StealMs: v[7]}, nil
}

// parsePressure reads the "some" line's total= of a PSI file, 0 when
// absent.
func parsePressure(psi string) int64 {
	for line := range strings.SplitSeq(psi, "\n") {
		rest, ok := strings.CutPrefix(line, "some ")
		if !ok {
			continue
		}
		for _, f := range strings.Fields(rest) {
			if v, ok := strings.CutPrefix(f, "total="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
	}
	return 0
}

// countFDs is the number of open file descriptors of pid.
func countFDs(pid int) (int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, fmt.Errorf("count open files: %w", err)
	}
	return len(ents), nil
}

// metrics reads the unlabelled samples of runnel's Prometheus text.
func (s *sampler) metrics(ctx context.Context) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.metricsURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil, fmt.Errorf("GET /metrics: HTTP %d", resp.StatusCode)
	}
	return parseMetrics(resp.Body)
}

// parseMetrics reads "name value" lines of the Prometheus text format,
// skipping comments and labelled series.
func parseMetrics(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' || strings.ContainsRune(line, '{') {
			continue
		}
		name, val, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
			out[name] = v
		}
	}
	return out, sc.Err()
}

// timeWait reads the host's TCP TIME_WAIT count from /proc/net/sockstat
// ("TCP: inuse 5 orphan 0 tw 2 alloc 7 mem 1").
func timeWait() (int, error) {
	raw, err := os.ReadFile("/proc/net/sockstat")
	if err != nil {
		return 0, err
	}
	return parseTimeWait(string(raw))
}

func parseTimeWait(sockstat string) (int, error) {
	for line := range strings.SplitSeq(sockstat, "\n") {
		rest, ok := strings.CutPrefix(line, "TCP:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		for i := 0; i+1 < len(f); i += 2 {
			if f[i] == "tw" {
				return strconv.Atoi(f[i+1])
			}
		}
	}
	return 0, fmt.Errorf("no TCP tw in sockstat")
}
