package sandbox

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
)

// Init is the sandbox's init: bwrap runs runnel's binary with
// InitCommand, and main hands it the rest of the arguments. Inside the
// namespaces, it sets the resource limits, starts the forwarders
// (loopback addresses that lead out through unix sockets), restricts
// itself with landlock, and runs the command: by exec when there is no
// forwarder to keep, else as its child, whose exit status it returns. It
// never returns on a successful exec.
func Init(args []string) int {
	if err := initRun(args); err != nil {
		fmt.Fprintln(os.Stderr, "runnel sandbox:", err)
		return 126
	}
	return 0
}

type initConfig struct {
	ro, rw, forwards []string
	cpu, as          int64
	argv             []string
}

func parseInit(args []string) (initConfig, error) {
	var c initConfig
	fs := flag.NewFlagSet(InitCommand, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Func("ro", "a directory readable", func(s string) error { c.ro = append(c.ro, s); return nil })
	fs.Func("rw", "a directory writable", func(s string) error { c.rw = append(c.rw, s); return nil })
	fs.Func("forward", "ADDR=SOCKET[=TARGET]", func(s string) error { c.forwards = append(c.forwards, s); return nil })
	fs.Int64Var(&c.cpu, "cpu", 0, "CPU seconds per process")
	fs.Int64Var(&c.as, "as", 0, "address space bytes per process")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.argv = fs.Args()
	if len(c.argv) == 0 {
		return c, errors.New("no command")
	}
	return c, nil
}

func initRun(args []string) error {
	c, err := parseInit(args)
	if err != nil {
		return err
	}
	if err := setLimit(syscall.RLIMIT_CPU, c.cpu); err != nil {
		return fmt.Errorf("limiting CPU time: %w", err)
	}
	if err := setLimit(syscall.RLIMIT_AS, c.as); err != nil {
		return fmt.Errorf("limiting memory: %w", err)
	}
	for _, f := range c.forwards {
		if err := startForward(f); err != nil {
			return err
		}
	}
	if len(c.ro)+len(c.rw) > 0 {
		if err := restrictPaths(c.ro, c.rw); err != nil {
			return fmt.Errorf("landlock: %w", err)
		}
	}
	path, err := exec.LookPath(c.argv[0])
	if err != nil {
		return err
	}
	if len(c.forwards) == 0 {
		return syscall.Exec(path, c.argv, os.Environ())
	}
	os.Exit(runChild(path, c.argv))
	return nil
}

// restrictPaths confines the process and what it starts to reading ro
// and reading and writing rw. A path that is not there is skipped; a
// file gets the rights of a file (landlock refuses directory rights on
// one).
func restrictPaths(ro, rw []string) error {
	var rules []landlock.Rule
	for _, p := range ro {
		fi, err := os.Stat(p)
		switch {
		case err != nil:
			continue
		case fi.IsDir():
			rules = append(rules, landlock.RODirs(p))
		default:
			rules = append(rules, landlock.ROFiles(p))
		}
	}
	for _, p := range rw {
		switch fi, err := os.Stat(p); {
		case err != nil:
			continue
		case p == "/dev":
			rules = append(rules, landlock.RWDirs(p).WithIoctlDev())
		case fi.IsDir():
			rules = append(rules, landlock.RWDirs(p).WithRefer())
		default:
			rules = append(rules, landlock.RWFiles(p))
		}
	}
	return landlock.V5.BestEffort().RestrictPaths(rules...)
}

func setLimit(res int, v int64) error {
	if v <= 0 {
		return nil
	}
	return syscall.Setrlimit(res, &syscall.Rlimit{Cur: uint64(v), Max: uint64(v)})
}

// runChild runs the command as Init's child, passes the signals Init
// gets on to it, and returns its exit status as a shell would.
func runChild(path string, argv []string) int {
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args = argv
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "runnel sandbox:", err)
		return 127
	}
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	_ = cmd.Wait()
	return exitCode(cmd.ProcessState)
}

// startForward listens on a loopback address inside the sandbox and
// relays every connection to a unix socket: as it is, or, with a target,
// after a CONNECT to it through the proxy behind the socket.
func startForward(spec string) error {
	parts := strings.SplitN(spec, "=", 3)
	if len(parts) < 2 {
		return fmt.Errorf("forward %q: want ADDR=SOCKET[=TARGET]", spec)
	}
	ln, err := net.Listen("tcp", parts[0])
	if err != nil {
		return fmt.Errorf("forward %s: %w", parts[0], err)
	}
	target := ""
	if len(parts) == 3 {
		target = parts[2]
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go relay(c, parts[1], target)
		}
	}()
	return nil
}

func relay(c net.Conn, socket, target string) {
	defer c.Close()
	u, err := net.Dial("unix", socket)
	if err != nil {
		return
	}
	defer u.Close()
	if target != "" {
		if err := connectThrough(u, target); err != nil {
			return
		}
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(u, c); closeWrite(u); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, u); closeWrite(c); done <- struct{}{} }()
	<-done
	<-done
}

// connectThrough asks the proxy on u for a tunnel to target.
func connectThrough(u net.Conn, target string) error {
	if _, err := fmt.Fprintf(u, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target); err != nil {
		return err
	}
	// One byte at a time, so nothing of the tunnel is read ahead.
	resp, err := http.ReadResponse(bufio.NewReaderSize(oneByte{u}, 16), nil)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return errors.New("proxy refused: " + strconv.Itoa(resp.StatusCode))
	}
	return nil
}

// oneByte reads at most one byte per call.
type oneByte struct{ r io.Reader }

func (o oneByte) Read(p []byte) (int, error) {
	if len(p) > 1 {
		p = p[:1]
	}
	return o.r.Read(p)
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}
