package run

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/egress"
	"github.com/runnel/runnel/internal/mcp"
	"github.com/runnel/runnel/internal/sandbox"
)

// checkSandbox picks the run's sandbox and refuses every boundary it
// cannot enforce (DESIGN §6): a declared boundary is never silently
// accepted.
func (m *Manager) checkSandbox(p *plan) error {
	sp := p.req.SandboxPermission
	if sp == nil {
		sp = &runnel.SandboxPermission{}
	}
	switch sp.Enforcement {
	case "", "strict", "best_effort":
	default:
		return invalid(`Unknown sandboxPermission.enforcement %q; use "strict" or "best_effort".`, sp.Enforcement)
	}
	net := runnel.NetworkPolicy{}
	if sp.Network != nil {
		net = *sp.Network
	}
	got := m.sandboxOf(p.req.Sandbox)
	p.log = p.log.With("sandbox", got)
	switch got {
	case "local":
		if sp.Filesystem != "" {
			return invalid(`Filesystem sandbox policy is not enforceable on the local sandbox; use sandbox "isolated", or remove sandboxPermission.filesystem.`)
		}
		if net.Mode != "" && net.Mode != "on" {
			return invalid(`Network sandbox policy is not enforceable on the local sandbox (runnel runs on this host with no egress control); use sandbox "isolated", or remove sandboxPermission.network.`)
		}
		return nil
	case "isolated":
	default:
		return invalid(`Unknown sandbox %q; use "local" or "isolated".`, p.req.Sandbox)
	}
	if !m.opts.Isolator.Supported() {
		return invalid(`Sandbox "isolated" is not available on this host (%s); use sandbox "local" without sandboxPermission restrictions, or run runnel where bubblewrap and user namespaces work.`,
			strings.TrimSuffix(m.opts.Isolator.Detail(), "."))
	}
	is := &sandbox.Isolation{Isolator: m.opts.Isolator, Limits: m.opts.SandboxLimits}
	switch sp.Filesystem {
	case "", "readonly":
		is.Filesystem = sandbox.FilesystemReadonly
	case "on", "off":
		is.Filesystem = sandbox.Filesystem(sp.Filesystem)
	default:
		return invalid(`Unknown sandboxPermission.filesystem %q; use "on", "readonly" or "off".`, sp.Filesystem)
	}
	switch net.Mode {
	case "", "on", "off":
		if len(net.Allowlist) > 0 {
			return invalid(`sandboxPermission.network.allowlist is only used with mode "allowlist"; set mode "allowlist", or remove the allowlist.`)
		}
		is.Network = sandbox.NetworkOn
		if net.Mode == "off" {
			is.Network = sandbox.NetworkOff
		}
	case "allowlist":
		a, err := egress.ParseAllowlist(net.Allowlist)
		if err != nil {
			return invalid("sandboxPermission.network: %s.", err)
		}
		is.Network, p.allow = sandbox.NetworkAllowlist, a
	default:
		return invalid(`Unknown sandboxPermission.network.mode %q; use "on", "off" or "allowlist".`, net.Mode)
	}
	p.isolation = is
	return nil
}

// sandboxOf is the sandbox a run gets: isolated when the host has it,
// unless the request asks for local and the operator allows local
// (Options.AllowLocalSandbox); local where the host cannot isolate. A
// request for local that gets isolated is only ever given more
// protection, never less.
func (m *Manager) sandboxOf(asked string) string {
	asked = strings.ToLower(strings.TrimSpace(asked))
	switch {
	case asked == "" && m.opts.Isolator.Supported():
		return "isolated"
	case asked == "":
		return "local"
	case asked == "local" && m.opts.Isolator.Supported() && !m.opts.AllowLocalSandbox:
		return "isolated"
	}
	return asked
}

// checkSandboxReach checks what a run must reach under a restricted
// network. An agent runs inside the sandbox (checkAgentReach). Under
// strict enforcement, a run carrying tools that runnel executes itself
// is refused: they run outside the sandbox, so its network policy would
// not bind them.
func checkSandboxReach(p *plan) error {
	if p.isolation == nil || p.isolation.Network == sandbox.NetworkOn {
		return nil
	}
	if p.agent != nil {
		if err := checkAgentReach(p); err != nil {
			return err
		}
	}
	if sp := p.req.SandboxPermission; sp != nil && sp.Enforcement == "best_effort" {
		return nil
	}
	var outside []string
	for _, s := range p.tools.Specs() {
		if s.EffectiveKind() == runnel.ToolKindCallback {
			outside = append(outside, fmt.Sprintf("callback tool %q", s.Name))
		}
	}
	if p.agent == nil {
		// An agent connects to the MCP servers itself, from inside; a
		// stdio server's program runs inside.
		for _, s := range p.mcp {
			if s.Transport != mcp.TransportStdio {
				outside = append(outside, fmt.Sprintf("MCP server %q", s.Name))
			}
		}
	}
	if len(outside) == 0 {
		return nil
	}
	return invalid(`The sandbox's network is %q, but the %s would run in runnel itself, outside the sandbox, where that policy does not reach; remove them, or set sandboxPermission.enforcement to "best_effort" to accept that they run outside it.`,
		p.isolation.Network, strings.Join(outside, ", "))
}

// checkAgentReach refuses an agent run whose agent could not reach, from
// inside a confined sandbox, its model or the user's MCP servers: none
// under network "off", and under an allowlist only what it names (it is
// never widened for them). A loopback one is forwarded in, where the
// proxy still judges every connection.
func checkAgentReach(p *plan) error {
	dests := [][2]string{{"its model", agentModel(p).URL()}}
	for _, s := range p.mcp {
		dests = append(dests, [2]string{fmt.Sprintf("MCP server %q", s.Name), s.URL})
	}
	for _, d := range dests {
		host, port, err := hostPort(d[1])
		if err != nil {
			return invalid("The URL of %s cannot be read: %s.", d[0], err)
		}
		if p.isolation.Network == sandbox.NetworkOff {
			return invalid(`The sandbox's network is "off", but harness %q runs inside it and must reach %s at %s; set sandboxPermission.network.mode to "allowlist" with %s on the allowlist.`,
				p.harness, d[0], host, host)
		}
		if !p.allow.Covers(host) {
			return invalid(`Harness %q runs inside the sandbox and must reach %s at %s, which sandboxPermission.network.allowlist does not admit; add %s to it.`,
				p.harness, d[0], host, host)
		}
		if ip, err := netip.ParseAddr(host); err == nil && ip.IsLoopback() {
			if fw := net.JoinHostPort(host, port); !slices.Contains(p.forwards, fw) {
				p.forwards = append(p.forwards, fw)
			}
		}
	}
	return nil
}

// hostPort is the host and port a URL connects to, "localhost" read as
// 127.0.0.1: the address the sandbox forwards and the allowlist judges.
func hostPort(raw string) (host, port string, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", errors.New("it is not a URL")
	}
	host, port = strings.ToLower(u.Hostname()), u.Port()
	if host == "" {
		return "", "", errors.New("it names no host")
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	return host, port, nil
}

// startEgress starts the run's allowlist proxy on a unix socket in a
// private directory, when the run has an allowlist; every refused
// connection is a notice. The returned stop removes it all.
func startEgress(p *plan, notice func(string)) (is *sandbox.Isolation, stop func(), err error) {
	stop = func() {}
	if p.isolation == nil || p.allow == nil {
		return p.isolation, stop, nil
	}
	dir, err := os.MkdirTemp("", "runnel-egress-")
	if err != nil {
		return nil, stop, fmt.Errorf("starting the egress proxy: %w", err)
	}
	sock := filepath.Join(dir, "proxy.sock")
	px, err := egress.Listen(sock, p.allow, &egress.Options{Denied: func(reason string) {
		p.log.Info("egress denied", "reason", reason)
		notice(reason + ".")
	}})
	if err != nil {
		os.RemoveAll(dir)
		return nil, stop, err
	}
	copied := *p.isolation
	copied.ProxySocket = sock
	return &copied, func() {
		if err := px.Close(); err != nil {
			p.log.Warn("egress proxy", "err", err)
		}
		os.RemoveAll(dir)
	}, nil
}
