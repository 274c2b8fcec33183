package run

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/egress"
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
	switch strings.ToLower(strings.TrimSpace(p.req.Sandbox)) {
	case "", "local":
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
	if p.agent != nil {
		// An agent inside needs its installation, its HOME and runnel's
		// tool server bridged in; until then it is refused, not run
		// outside.
		return invalid(`Harness %q does not run in the isolated sandbox in this runnel build yet; use harness "native" with sandbox "isolated", or sandbox "local" without sandboxPermission restrictions.`, p.harness)
	}
	if !m.opts.Isolator.Supported() {
		return invalid(`Sandbox "isolated" is not available on this host (%s); use sandbox "local" without sandboxPermission restrictions, or run runnel where bubblewrap and user namespaces work.`,
			strings.TrimSuffix(m.opts.Isolator.Detail(), "."))
	}
	is := &sandbox.Isolation{Isolator: m.opts.Isolator}
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

// checkSandboxReach refuses, under a restricted network and strict
// enforcement, a run carrying tools that runnel executes itself: they
// run outside the sandbox, so its network policy would not bind them.
func checkSandboxReach(p *plan) error {
	if p.isolation == nil || p.isolation.Network == sandbox.NetworkOn {
		return nil
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
	for _, s := range p.mcp {
		outside = append(outside, fmt.Sprintf("MCP server %q", s.Name))
	}
	if len(outside) == 0 {
		return nil
	}
	return invalid(`The sandbox's network is %q, but the %s would run in runnel itself, outside the sandbox, where that policy does not reach; remove them, or set sandboxPermission.enforcement to "best_effort" to accept that they run outside it.`,
		p.isolation.Network, strings.Join(outside, ", "))
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
