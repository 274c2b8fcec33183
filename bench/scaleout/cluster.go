package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/template"
	"time"

	"github.com/runnel/runnel/bench/internal/benchkit"
)

// replica is one `runnel serve` behind the balancer, on a fixed loopback
// port, so that a restarted replica comes back where HAProxy looks for it.
// Its log (one file per start) stays in the run's directory. Not safe for
// concurrent use: the phases start, signal and wait for a replica from one
// goroutine.
type replica struct {
	name string // HAProxy's name for it, and X-Served-By's value
	port int
	url  string
	bin  string
	env  []string
	dir  string
	gen  int // how many times it was started

	cmd      *exec.Cmd
	exited   chan struct{} // closed once the process has been waited for
	exitedAt time.Time     // set before exited is closed
}

func newReplica(name, bin, dir string, env []string) (*replica, error) {
	port, err := benchkit.FreePort()
	if err != nil {
		return nil, err
	}
	return &replica{name: name, port: port, url: fmt.Sprintf("http://127.0.0.1:%d", port), bin: bin, dir: dir,
		env: append(append([]string(nil), env...), "RUNNEL_HOST=127.0.0.1", "RUNNEL_PORT="+strconv.Itoa(port))}, nil
}

// start starts the process and waits for GET /health.
func (r *replica) start(ctx context.Context) error {
	r.gen++
	log, err := os.Create(filepath.Join(r.dir, fmt.Sprintf("%s-%d.log", r.name, r.gen)))
	if err != nil {
		return err
	}
	cmd := exec.Command(r.bin, "serve")
	cmd.Env = r.env
	cmd.Stdout, cmd.Stderr = log, log
	// If this driver dies without cleaning up, the replica goes with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start replica %s: %w", r.name, err)
	}
	r.cmd, r.exited = cmd, make(chan struct{})
	exited := r.exited
	go func() {
		_ = cmd.Wait()
		log.Close()
		r.exitedAt = time.Now()
		close(exited)
	}()
	if err := benchkit.WaitHealthy(ctx, r.url+"/health", 15*time.Second); err != nil {
		r.kill()
		return fmt.Errorf("replica %s: %w", r.name, err)
	}
	return nil
}

func (r *replica) pid() int { return r.cmd.Process.Pid }

// wait waits up to limit for the process to exit and reports when it did.
func (r *replica) wait(limit time.Duration) (time.Time, bool) {
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-r.exited:
		return r.exitedAt, true
	case <-t.C:
		return time.Time{}, false
	}
}

func (r *replica) running() bool {
	if r.cmd == nil {
		return false
	}
	select {
	case <-r.exited:
		return false
	default:
		return true
	}
}

// kill ends the process at once and waits for it.
func (r *replica) kill() {
	if r.running() {
		_ = r.cmd.Process.Kill()
		<-r.exited
	}
}

// stop asks the process to drain, then kills it if it lingers.
func (r *replica) stop(grace time.Duration) {
	if !r.running() {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	if _, ok := r.wait(grace); !ok {
		r.kill()
	}
}

// balancerConfig is HAProxy's configuration: HTTP mode, round robin over
// the replicas, health checks on /health, a response header naming the
// server that answered (on HAProxy's own error pages too:
// http-after-response), timeouts far above any run, and a connection
// refused retried at once on another server. Nothing buffers the NDJSON
// answers: HAProxy forwards response data as it arrives unless told to
// compress or cache, and this configuration does neither.
const balancerConfig = `global
    maxconn 8192
    stats socket {{.Socket}} mode 600 level admin
    stats timeout 10s

defaults
    mode http
    maxconn 8192
    timeout connect 2s
    timeout client 5m
    timeout server 5m
    timeout http-request 10s
    timeout http-keep-alive 30s
    timeout queue 10s
    retries 2
    option redispatch 1

frontend runnel_front
    bind 127.0.0.1:{{.Port}}
    default_backend runnel

backend runnel
    balance roundrobin
    option httpchk
    http-check send meth GET uri /health
    http-check expect status 200
    http-after-response set-header X-Served-By %[srv_name]
    default-server inter 1s fastinter 250ms downinter 1s fall 2 rise 2
{{- range .Servers}}
    server {{.Name}} 127.0.0.1:{{.Port}} check
{{- end}}
`

// balancer is HAProxy in the foreground (-db), a child of this driver.
type balancer struct {
	url    string
	socket string
	cmd    *exec.Cmd
	exited chan struct{}
}

func startBalancer(ctx context.Context, bin, dir string, replicas []*replica) (*balancer, error) {
	port, err := benchkit.FreePort()
	if err != nil {
		return nil, err
	}
	type server struct {
		Name string
		Port int
	}
	data := struct {
		Socket  string
		Port    int
		Servers []server
	}{Socket: filepath.Join(dir, "haproxy.sock"), Port: port}
	for _, r := range replicas {
		data.Servers = append(data.Servers, server{r.name, r.port})
	}
	cfgPath := filepath.Join(dir, "haproxy.cfg")
	var cfg strings.Builder
	if err := template.Must(template.New("cfg").Parse(balancerConfig)).Execute(&cfg, data); err != nil {
		return nil, err
	}
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o600); err != nil {
		return nil, err
	}
	if out, err := exec.CommandContext(ctx, bin, "-c", "-f", cfgPath).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("haproxy -c: %w\n%s", err, out)
	}
	log, err := os.Create(filepath.Join(dir, "haproxy.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-db", "-f", cfgPath)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start haproxy: %w", err)
	}
	b := &balancer{url: fmt.Sprintf("http://127.0.0.1:%d", port), socket: data.Socket, cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); log.Close(); close(b.exited) }()
	for _, r := range replicas {
		if _, err := b.waitStatus(ctx, r.name, "UP", 15*time.Second); err != nil {
			b.close()
			return nil, err
		}
	}
	return b, nil
}

func (b *balancer) pid() int { return b.cmd.Process.Pid }

// close stops HAProxy (SIGUSR1 is its soft stop; SIGTERM its hard one,
// fine once the load is over) and waits for it.
func (b *balancer) close() {
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(5 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.exited
	}
}

// serverStat is one server's line of HAProxy's `show stat`.
type serverStat struct {
	Status   string // UP, DOWN, "UP 1/2" (going down), "DOWN 1/2" (coming up), MAINT
	Sessions int64  // stot: connections it was given
	// Retries (wretr) are connection attempts to it that failed and were
	// tried again; Redispatches (wredis) those tried on another server.
	Retries, Redispatches int64
}

// stats asks the stats socket for `show stat` and returns the backend's
// servers by name.
func (b *balancer) stats() (map[string]serverStat, error) {
	conn, err := net.DialTimeout("unix", b.socket, 2*time.Second)
	if err != nil {
		return nil, fmt.Errorf("haproxy stats socket: %w", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, "show stat\n"); err != nil {
		return nil, fmt.Errorf("haproxy stats socket: %w", err)
	}
	raw, err := io.ReadAll(conn)
	if err != nil {
		return nil, fmt.Errorf("haproxy stats socket: %w", err)
	}
	return parseStat(string(raw), "runnel")
}

// parseStat reads `show stat` CSV: a "# pxname,svname,…" header, then one
// line per frontend, backend and server.
func parseStat(csv, backend string) (map[string]serverStat, error) {
	sc := bufio.NewScanner(strings.NewReader(csv))
	col := map[string]int{}
	out := map[string]serverStat{}
	for sc.Scan() {
		line := sc.Text()
		if h, ok := strings.CutPrefix(line, "# "); ok {
			for i, name := range strings.Split(h, ",") {
				col[name] = i
			}
			continue
		}
		f := strings.Split(line, ",")
		get := func(name string) string {
			if i, ok := col[name]; ok && i < len(f) {
				return f[i]
			}
			return ""
		}
		if len(col) == 0 || get("pxname") != backend {
			continue
		}
		if sv := get("svname"); sv != "BACKEND" && sv != "FRONTEND" {
			num := func(name string) int64 {
				n, _ := strconv.ParseInt(get(name), 10, 64)
				return n
			}
			out[sv] = serverStat{Status: get("status"), Sessions: num("stot"), Retries: num("wretr"), Redispatches: num("wredis")}
		}
	}
	if len(col) == 0 {
		return nil, errors.New("haproxy stats: no CSV header in the answer")
	}
	return out, nil
}

// waitStatus polls until server name's status is want (exactly: "UP" is
// not "UP 1/2") and returns when it saw it, polling every 50 ms for at
// most limit.
func (b *balancer) waitStatus(ctx context.Context, name, want string, limit time.Duration) (time.Time, error) {
	deadline := time.Now().Add(limit)
	var last string
	for {
		st, err := b.stats()
		if err == nil {
			if last = st[name].Status; last == want {
				return time.Now(), nil
			}
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("haproxy: server %s not %s after %s (last status %q, err %v)", name, want, limit, last, err)
		}
		if err := benchkit.Sleep(ctx, 50*time.Millisecond); err != nil {
			return time.Time{}, err
		}
	}
}
