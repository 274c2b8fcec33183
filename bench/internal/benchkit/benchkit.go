// Package benchkit holds what the benchmark drivers under bench/ share:
// starting and stopping the processes they measure, finding a loopback
// port, reading a process's CPU time from /proc, and order statistics.
//
//	port, err := benchkit.FreePort()
//	// start `runnel serve` on 127.0.0.1:port …
//	if err := benchkit.WaitHealthy(ctx, url+"/health", 15*time.Second); err != nil {
//		return err
//	}
//	before, _ := benchkit.ReadCPU(cmd.Process.Pid)
//	// … the work being measured …
//	after, _ := benchkit.ReadCPU(cmd.Process.Pid)
//	own := after.Self - before.Self
//	benchkit.StopProcess(cmd, syscall.SIGTERM, 10*time.Second)
package benchkit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// FreePort is a TCP port on 127.0.0.1 that was free a moment ago. A
// server told to listen on it may still lose it to another process; the
// benchmarks accept that race for the sake of knowing the URL up front.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// WaitHealthy polls GET url until it answers 200, for at most limit.
func WaitHealthy(ctx context.Context, url string, limit time.Duration) error {
	// A client of its own: its idle connection must not stay in
	// http.DefaultClient's pool, where it would outlive the probe.
	return WaitHealthyWith(ctx, &http.Client{Transport: &http.Transport{}}, url, limit)
}

// WaitHealthyWith is WaitHealthy with the client to probe with (one that
// trusts a test certificate); it closes the client's idle connections.
func WaitHealthyWith(ctx context.Context, client *http.Client, url string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	defer client.CloseIdleConnections()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("probe %s: %w", url, err)
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last error: %v)", url, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// StopProcess sends sig (when not nil) and waits up to grace for the
// process to exit, then kills it. It waits for the process, so the
// caller must not call cmd.Wait itself.
func StopProcess(cmd *exec.Cmd, sig os.Signal, grace time.Duration) {
	if sig != nil {
		_ = cmd.Process.Signal(sig)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		_ = cmd.Process.Kill()
		<-done
	}
}

// CPU is a process's CPU time as /proc/PID/stat reports it: its own
// (user+system, every thread) and that of the children it has waited for
// (cutime+cstime, which includes their own waited-for children).
type CPU struct {
	Self     time.Duration `json:"selfNs"`
	Children time.Duration `json:"childrenNs"`
}

// Sub is the CPU spent between an earlier reading and c.
func (c CPU) Sub(earlier CPU) CPU {
	return CPU{Self: c.Self - earlier.Self, Children: c.Children - earlier.Children}
}

// Total is the process's CPU and its waited-for children's.
func (c CPU) Total() time.Duration { return c.Self + c.Children }

// ticksPerSecond is sysconf(_SC_CLK_TCK), 100 on every Linux
// architecture Go supports; /proc reports CPU time in these ticks, so a
// reading is exact to 10 ms.
const ticksPerSecond = 100

// ReadCPU reads a live (or not yet reaped) process's CPU time.
func ReadCPU(pid int) (CPU, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return CPU{}, fmt.Errorf("read CPU time: %w", err)
	}
	return parseStat(raw)
}

// parseStat reads utime, stime, cutime and cstime (fields 14 to 17 of
// proc(5)) from a /proc/PID/stat line. The command name, field 2, is in
// parentheses and may hold spaces and parentheses itself, so the fields
// are counted from the last ')'.
func parseStat(raw []byte) (CPU, error) {
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 || i+2 > len(raw) {
		return CPU{}, fmt.Errorf("read CPU time: malformed stat line %q", raw)
	}
	f := strings.Fields(string(raw[i+2:]))
	if len(f) < 15 {
		return CPU{}, fmt.Errorf("read CPU time: %d fields after the command name, want at least 15", len(f))
	}
	// f[0] is field 3 (state), so field n is f[n-3].
	var ticks [4]int64
	for k := range ticks {
		v, err := strconv.ParseInt(f[11+k], 10, 64)
		if err != nil {
			return CPU{}, fmt.Errorf("read CPU time: field %d: %w", 14+k, err)
		}
		ticks[k] = v
	}
	tick := func(n int64) time.Duration { return time.Duration(n) * time.Second / ticksPerSecond }
	return CPU{Self: tick(ticks[0] + ticks[1]), Children: tick(ticks[2] + ticks[3])}, nil
}

// ReadThreadsCPU is a live process's own CPU time to the nanosecond: the
// sum of its threads' run time from /proc/PID/task/*/schedstat. ReadCPU
// is exact only to a clock tick (10 ms), too coarse for a few calls' worth
// of work; this misses the time of threads that have exited, which a Go
// program's threads rarely do.
func ReadThreadsCPU(pid int) (time.Duration, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("read CPU time: %w", err)
	}
	var sum time.Duration
	for _, t := range tasks {
		raw, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if errors.Is(err, fs.ErrNotExist) {
			continue // the thread exited meanwhile
		}
		if err != nil {
			return 0, fmt.Errorf("read CPU time: %w", err)
		}
		f := strings.Fields(string(raw))
		if len(f) == 0 {
			return 0, fmt.Errorf("read CPU time: empty %s/%s/schedstat", dir, t.Name())
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("read CPU time: %w", err)
		}
		sum += time.Duration(ns)
	}
	return sum, nil
}

// Median is the middle of d (the upper one of an even count).
func Median(d []time.Duration) time.Duration { return Quantile(d, 0.5) }

// Quantile is the value at index ⌊q·n⌋ of d sorted (the last one for
// q = 1), 0 for none. d is not modified.
func Quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// Sleep waits d, or until ctx ends.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// WriteJSON writes v, indented, to path: a driver's -json report.
func WriteJSON(path string, v any) error {
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(raw, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Status is what /proc/PID/status says about a process's memory.
type Status struct {
	RSSKiB  int64 `json:"rssKiB"`  // VmRSS: resident now
	HWMKiB  int64 `json:"hwmKiB"`  // VmHWM: the most ever resident
	Threads int   `json:"threads"` // OS threads
}

// ReadStatus reads a live process's VmRSS, VmHWM and thread count.
func ReadStatus(pid int) (Status, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Status{}, err
	}
	return parseStatus(pid, raw)
}

func parseStatus(pid int, raw []byte) (Status, error) {
	var s Status
	for line := range strings.SplitSeq(string(raw), "\n") {
		k, v, ok := strings.Cut(line, ":")
		fields := strings.Fields(v)
		if !ok || len(fields) == 0 {
			continue
		}
		switch k {
		case "VmRSS":
			s.RSSKiB, _ = strconv.ParseInt(fields[0], 10, 64)
		case "VmHWM":
			s.HWMKiB, _ = strconv.ParseInt(fields[0], 10, 64)
		case "Threads":
			s.Threads, _ = strconv.Atoi(fields[0])
		}
	}
	if s.RSSKiB == 0 {
		return s, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
	}
	return s, nil
}
