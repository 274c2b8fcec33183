package sandbox

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Filesystem is how much of the host an isolated process sees (DESIGN §6).
type Filesystem string

const (
	// FilesystemReadonly shows the host read-only; the workspace and a
	// private /tmp are writable. The default of the isolated sandbox.
	FilesystemReadonly Filesystem = "readonly"
	// FilesystemOff shows only the workspace, a private /tmp and the
	// directories programs need to start (ToolchainDirs).
	FilesystemOff Filesystem = "off"
	// FilesystemOn shows the host as it is, writable where the runnel
	// user may write, still in namespaces of its own: other workspaces,
	// runnel's process and the host's /tmp stay out of sight.
	FilesystemOn Filesystem = "on"
)

// Network is what an isolated process may reach.
type Network string

const (
	// NetworkOn shares the host's network.
	NetworkOn Network = "on"
	// NetworkOff gives the process a network namespace with loopback
	// only.
	NetworkOff Network = "off"
	// NetworkAllowlist is NetworkOff plus the run's egress proxy, reached
	// through a unix socket (Isolation.ProxySocket): a process that
	// ignores the proxy has no route anywhere.
	NetworkAllowlist Network = "allowlist"
)

// ToolchainDirs are what FilesystemOff shows of the host besides the
// workspace: the programs and libraries of the system, and the files of
// /etc that name resolution, TLS and user lookups read. docs/security.md
// lists them.
func ToolchainDirs() []string {
	return []string{
		"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
		"/etc/alternatives", "/etc/ssl", "/etc/ca-certificates", "/etc/pki",
		"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts",
		"/etc/resolv.conf", "/etc/localtime", "/etc/ld.so.cache", "/etc/ld.so.conf",
		"/etc/ld.so.conf.d", "/etc/mime.types",
	}
}

// Limits bound what the processes of one isolated command or program may
// use. A zero field is no bound. Isolator.Bounds says which this host
// enforces.
type Limits struct {
	// CPU is the processor time each process may use (RLIMIT_CPU).
	CPU time.Duration
	// Memory is the memory of all the command's processes together (a
	// memory cgroup, v2 or v1).
	Memory int64
	// Processes is how many processes and threads the command may have
	// at once (a pids cgroup, v2 or v1): a fork bomb stops there.
	Processes int
	// AddressSpace is the address space each process may map
	// (RLIMIT_AS), for a host without memory cgroups. It breaks runtimes
	// that reserve more than they use (Node's WebAssembly, JITs), so it
	// is never set by default.
	AddressSpace int64
}

// Isolation is how a workspace's commands and programs are isolated. A
// nil *Isolation on a workspace is the local sandbox: processes run on
// the host.
type Isolation struct {
	// Isolator is the host's isolated backend (ProbeIsolator).
	Isolator *Isolator
	// Filesystem is the host view; empty means FilesystemReadonly.
	Filesystem Filesystem
	// Network is the network; empty means NetworkOn.
	Network Network
	// ProxySocket is the unix socket of the run's egress proxy, on the
	// host, for NetworkAllowlist.
	ProxySocket string
	// Forwards are loopback addresses that, inside the sandbox, lead to
	// a host address through the proxy (NetworkAllowlist): an agent
	// configured with http://127.0.0.1:8080 reaches the host's
	// 127.0.0.1:8080 as if it were there, when the allowlist admits it.
	Forwards []string
	// Sockets are unix sockets of runnel's (the run's internal MCP
	// server) that, inside the sandbox, are a loopback address:
	// "127.0.0.1:PORT=/host/path.sock".
	Sockets []string
	// Hide are host directories replaced by an empty one inside: the
	// root of all workspaces, so that a run never sees another's.
	Hide []string
	// ReadOnly and Writable are more host directories to show, at the
	// same path (an agent's installation; its HOME).
	ReadOnly, Writable []string
	// Limits bound the processes' resources.
	Limits Limits
}

// proxyPort is where, inside a NetworkAllowlist sandbox, the forwarder
// listens for the proxy; the namespace is the sandbox's own, so the
// port is always free.
const proxyPort = 3128

// Paths inside the sandbox, on its private /tmp.
const (
	insideDir   = "/tmp/.runnel"
	insideInit  = insideDir + "/init"
	insideProxy = insideDir + "/proxy.sock"
)

// InitCommand is the argument that makes runnel's binary the sandbox's
// init (Init): the program that sets the last restrictions up from inside
// and then runs the command.
const InitCommand = "sandbox-init"

func (is *Isolation) filesystem() Filesystem {
	if is.Filesystem == "" {
		return FilesystemReadonly
	}
	return is.Filesystem
}

func (is *Isolation) network() Network {
	if is.Network == "" {
		return NetworkOn
	}
	return is.Network
}

// wrap turns argv, to run in dir of ws, into the bubblewrap command line
// that runs it isolated. Only paths and flags go on it, never the
// environment: bwrap's command line is readable by anyone on the host,
// its environment (passed on to the command) is not.
func (is *Isolation) wrap(ws string, dir string, argv []string, flags ...string) []string {
	a := []string{is.Isolator.bwrap,
		"--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try",
		// The command dies with runnel; it cannot push input into a
		// terminal it shares (TIOCSTI); it keeps no capability, so the
		// mounts below cannot be undone from inside.
		"--die-with-parent", "--new-session", "--cap-drop", "ALL",
	}
	if is.network() != NetworkOn {
		a = append(a, "--unshare-net")
	}
	switch is.filesystem() {
	case FilesystemOn:
		a = append(a, "--bind", "/", "/")
	case FilesystemReadonly:
		a = append(a, "--ro-bind", "/", "/")
	case FilesystemOff:
		for _, d := range ToolchainDirs() {
			a = append(a, "--ro-bind-try", d, d)
		}
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp")
	for _, d := range is.Hide {
		a = append(a, "--tmpfs", d)
	}
	for _, d := range is.ReadOnly {
		a = append(a, "--ro-bind", d, d)
	}
	for _, d := range is.Writable {
		a = append(a, "--bind", d, d)
	}
	a = append(a, "--bind", ws, ws,
		"--dir", insideDir, "--ro-bind", is.Isolator.helper, insideInit)
	if is.network() == NetworkAllowlist {
		a = append(a, "--bind", is.ProxySocket, insideProxy)
	}
	for i, s := range is.Sockets {
		_, host, _ := strings.Cut(s, "=")
		a = append(a, "--bind", host, insideSocket(i))
	}
	a = append(a, flags...)
	a = append(a, "--chdir", dir, "--", insideInit, InitCommand)
	a = append(a, is.initArgs(ws)...)
	return append(append(a, "--"), argv...)
}

func insideSocket(i int) string { return insideDir + "/socket-" + strconv.Itoa(i) + ".sock" }

// initArgs are Init's flags: the landlock rules (the second layer under
// the mounts), the limits, and the forwarders.
func (is *Isolation) initArgs(ws string) []string {
	var a []string
	if is.Isolator.landlock {
		switch is.filesystem() {
		case FilesystemReadonly:
			a = append(a, "-ro", "/")
		case FilesystemOff:
			for _, d := range append(ToolchainDirs(), "/proc") {
				a = append(a, "-ro", d)
			}
		}
		if is.filesystem() != FilesystemOn {
			for _, d := range is.ReadOnly {
				a = append(a, "-ro", d)
			}
			for _, d := range slices.Concat([]string{ws, "/tmp", "/dev"}, is.Writable) {
				a = append(a, "-rw", d)
			}
		}
	}
	if is.Limits.CPU > 0 {
		a = append(a, "-cpu", strconv.FormatInt(int64((is.Limits.CPU+time.Second-1)/time.Second), 10))
	}
	if is.Limits.AddressSpace > 0 {
		a = append(a, "-as", strconv.FormatInt(is.Limits.AddressSpace, 10))
	}
	if is.network() == NetworkAllowlist {
		a = append(a, "-forward", fmt.Sprintf("127.0.0.1:%d=%s", proxyPort, insideProxy))
		for _, f := range is.Forwards {
			a = append(a, "-forward", f+"="+insideProxy+"="+f)
		}
	}
	for i, s := range is.Sockets {
		addr, _, _ := strings.Cut(s, "=")
		a = append(a, "-forward", addr+"="+insideSocket(i))
	}
	return a
}

// proxyEnv is the environment that points programs at the proxy.
func (is *Isolation) proxyEnv() []string {
	if is.network() != NetworkAllowlist {
		return nil
	}
	u := "http://127.0.0.1:" + strconv.Itoa(proxyPort)
	var env []string
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"} {
		env = append(env, k+"="+u)
	}
	// Loopback stays loopback: forwarded addresses are reached directly.
	return append(env, "NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1")
}

// check refuses an isolation that cannot be built: it names what to
// change.
func (is *Isolation) check() error {
	switch {
	case is.Isolator == nil || !is.Isolator.Supported():
		return fmt.Errorf("the isolated sandbox is not available on this host")
	case !slices.Contains([]Filesystem{FilesystemOn, FilesystemReadonly, FilesystemOff}, is.filesystem()):
		return fmt.Errorf("unknown filesystem policy %q", is.Filesystem)
	case !slices.Contains([]Network{NetworkOn, NetworkOff, NetworkAllowlist}, is.network()):
		return fmt.Errorf("unknown network policy %q", is.Network)
	case is.network() == NetworkAllowlist && is.ProxySocket == "":
		return fmt.Errorf("a network allowlist needs the run's proxy socket")
	}
	for _, d := range slices.Concat(is.Hide, is.ReadOnly, is.Writable) {
		if !filepath.IsAbs(d) {
			return fmt.Errorf("sandbox path %q is not absolute", d)
		}
	}
	proxy := "127.0.0.1:" + strconv.Itoa(proxyPort)
	for _, s := range is.Sockets {
		addr, _, _ := strings.Cut(s, "=")
		if addr == proxy || slices.Contains(is.Forwards, addr) {
			return fmt.Errorf("inside the sandbox, %s would serve two things", addr)
		}
	}
	if is.network() == NetworkAllowlist && slices.Contains(is.Forwards, proxy) {
		return fmt.Errorf("%s cannot be forwarded into the sandbox: its proxy listens there", proxy)
	}
	return nil
}
