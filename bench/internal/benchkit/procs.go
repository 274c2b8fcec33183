package benchkit

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Runnel is a `runnel serve` subprocess on a loopback port.
type Runnel struct {
	URL string
	Cmd *exec.Cmd
	// cgroup is its cgroup v2 (StartRunnelInCgroup), removed by Close.
	cgroup string
}

// StartRunnel starts bin as `runnel serve` on 127.0.0.1 and waits for
// GET /health. env is the server's whole environment (configuration goes
// through the documented RUNNEL_* variables); RUNNEL_HOST and RUNNEL_PORT
// are added. Its output is discarded: one log line per run would cost
// every contestant the same, and would clutter the terminal.
func StartRunnel(ctx context.Context, bin string, env []string) (*Runnel, error) {
	return startRunnel(ctx, bin, env, nil)
}

func startRunnel(ctx context.Context, bin string, env []string, attr *syscall.SysProcAttr) (*Runnel, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, "serve")
	cmd.Env = append(append([]string(nil), env...), "RUNNEL_HOST=127.0.0.1", "RUNNEL_PORT="+strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	cmd.WaitDelay = 5 * time.Second
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s serve: %w", bin, err)
	}
	r := &Runnel{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Cmd: cmd}
	if err := WaitHealthy(ctx, r.URL+"/health", 15*time.Second); err != nil {
		r.Close()
		return nil, fmt.Errorf("runnel serve did not become healthy: %w", err)
	}
	return r, nil
}

// PID is the server's process id.
func (r *Runnel) PID() int { return r.Cmd.Process.Pid }

// CPU is the server's CPU time so far, its reaped agents' included.
func (r *Runnel) CPU() (CPU, error) { return ReadCPU(r.PID()) }

// Close asks runnel to drain (SIGTERM), then kills it if it lingers.
func (r *Runnel) Close() {
	StopProcess(r.Cmd, syscall.SIGTERM, 10*time.Second)
	if r.cgroup != "" {
		_ = syscall.Rmdir(r.cgroup)
	}
}

// CallbackHandler is a platform's tool endpoint: it decodes runnel's
// callback envelope (DESIGN §4.2) and answers output for every call of
// the tool named name; anything else is a 400.
func CallbackHandler(name, output string) http.Handler {
	type status struct {
		Code string `json:"code"`
	}
	type data struct {
		Role       string `json:"role"`
		ToolCallID string `json:"tool_call_id"`
		Content    string `json:"content"`
	}
	type call struct {
		ID     string `json:"id"`
		Status status `json:"status"`
		Data   data   `json:"data"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Data struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string          `json:"name"`
					Arguments json.RawMessage `json:"arguments"`
				} `json:"function"`
			} `json:"data"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil || in.Data.Function.Name != name {
			http.Error(w, "bad envelope", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(struct {
			Call call `json:"call"`
		}{call{in.Data.ID, status{"STATUS_CODE_OK"}, data{"tool", in.Data.ID, output}}})
	})
}

// StartSelf starts this program again with args — a driver serving one
// side of a benchmark in a process of its own, whose CPU can then be read
// apart — talking over its standard input and output.
func StartSelf(ctx context.Context, args ...string) (cmd *exec.Cmd, stdin io.WriteCloser, stdout *bufio.Reader, err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("find own executable: %w", err)
	}
	cmd = exec.CommandContext(ctx, self, args...)
	cmd.Stderr = os.Stderr
	cmd.WaitDelay = 5 * time.Second
	if stdin, err = cmd.StdinPipe(); err != nil {
		return nil, nil, nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, nil, fmt.Errorf("start %s %s: %w", self, args[0], err)
	}
	return cmd, stdin, bufio.NewReader(out), nil
}

// StartRunnelInCgroup is StartRunnel with runnel started inside a new
// cgroup v2 of its own, made under this process's: CgroupCPU then counts
// every process runnel starts, wherever it is reaped. An isolated
// sandbox's processes are reaped inside its own pid namespace, so
// /proc/PID/stat's cutime never sees them.
func StartRunnelInCgroup(ctx context.Context, bin string, env []string) (*Runnel, error) {
	dir, err := newCgroup()
	if err != nil {
		return nil, err
	}
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		_ = syscall.Rmdir(dir)
		return nil, fmt.Errorf("open the cgroup: %w", err)
	}
	defer syscall.Close(fd)
	r, err := startRunnel(ctx, bin, env, &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd})
	if err != nil {
		_ = syscall.Rmdir(dir)
		return nil, err
	}
	r.cgroup = dir
	return r, nil
}

// CgroupCPU is the CPU time of everything in runnel's cgroup so far
// (StartRunnelInCgroup): runnel's own and every process it started.
func (r *Runnel) CgroupCPU() (time.Duration, error) {
	raw, err := os.ReadFile(filepath.Join(r.cgroup, "cpu.stat"))
	if err != nil {
		return 0, fmt.Errorf("read the cgroup's CPU time: %w", err)
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			us, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return time.Duration(us) * time.Microsecond, err
		}
	}
	return 0, errors.New("cpu.stat has no usage_usec")
}

// newCgroup makes a cgroup v2 under this process's own.
func newCgroup() (string, error) {
	raw, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	var own string
	for line := range strings.SplitSeq(string(raw), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			own = p
		}
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(string(mounts), "\n") {
		f := strings.Fields(line)
		sep := slices.Index(f, "-")
		if own == "" || sep < 5 || sep+1 >= len(f) || f[sep+1] != "cgroup2" || !strings.HasPrefix(own, f[3]) {
			continue
		}
		dir := filepath.Join(f[4], strings.TrimPrefix(own, f[3]), fmt.Sprintf("bench-runnel-%d-%d", os.Getpid(), time.Now().UnixNano()))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return "", fmt.Errorf("make a cgroup for runnel: %w", err)
		}
		return dir, nil
	}
	return "", errors.New("this process is in no cgroup v2 hierarchy")
}
