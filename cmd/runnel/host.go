package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/runnel/runnel/internal/agents"
	"github.com/runnel/runnel/internal/codemode"
	"github.com/runnel/runnel/internal/provider"
	"github.com/runnel/runnel/internal/sandbox"
	"github.com/runnel/runnel/internal/server"
	"github.com/runnel/runnel/internal/telemetry"
)

// host is what runnel sets up on the machine once per process, for every
// run: how the processes of runs are ended, the start-up sweeps of what a
// crashed runnel left behind, the process-wide bound on abandoned
// code-mode scripts, and the code-mode sandboxes kept ready.
type host struct {
	containment *sandbox.Containment
	isolator    *sandbox.Isolator
	scripts     *codemode.Limiter
	warm        *codemode.Warm
	agents      *agents.Registry
	root        bool
	// limits bound each isolated command or agent.
	limits sandbox.Limits
	// localAllowed: a request for sandbox "local" gets it.
	localAllowed bool
	// tel traces and counts the runs.
	tel *telemetry.Telemetry
	// outbound reaches model APIs, tool callbacks and attachments: one
	// pool of connections for every run (HTTP/2 streams of one connection
	// per provider where the provider speaks it).
	outbound *http.Transport
}

// setUpHost probes process containment and sweeps what dead runnel
// processes left: their cgroups first (a leftover process could hold a
// workspace), then their workspaces, unless workspaces are kept on
// purpose. Live replicas sharing the workspace root are never touched.
func setUpHost(cfg *Config, log *slog.Logger) (*host, error) {
	prefer := sandbox.Mechanism(cfg.Containment)
	if cfg.Containment == "auto" {
		prefer = ""
	}
	// The isolator first: its trial sandbox leaves a process behind that
	// is reparented to runnel once runnel is the child subreaper (the
	// containment probe makes it one), where nothing would reap it; before
	// that, init reaps it.
	iso, err := sandbox.ProbeIsolator(context.Background(), nil)
	if err != nil {
		return nil, fmt.Errorf("isolated sandbox: %w", err)
	}
	c, err := sandbox.ProbeContainment(&sandbox.ContainmentOptions{Prefer: prefer, CgroupParent: cfg.CgroupParent})
	if err != nil {
		_ = iso.Close()
		return nil, fmt.Errorf("process containment: %w", err)
	}
	if cfg.AllowLocalSandbox != nil && !*cfg.AllowLocalSandbox && !iso.Supported() {
		return nil, fmt.Errorf("RUNNEL_ALLOW_LOCAL_SANDBOX is false, but this host has no isolated sandbox (%s): install bubblewrap and allow user namespaces, or allow the local sandbox", strings.TrimSuffix(iso.Detail(), "."))
	}
	h := &host{containment: c, isolator: iso, limits: cfg.SandboxLimits, localAllowed: cfg.localAllowed(iso), scripts: codemode.NewLimiter(0), warm: codemode.NewWarm(nil), root: os.Geteuid() == 0,
		outbound: provider.NewTransport()}
	log.Info("process containment", slog.String("mechanism", string(c.Mechanism())), slog.String("detail", c.Detail()))
	log.Info("isolated sandbox", slog.Bool("available", iso.Supported()), slog.String("detail", iso.Detail()),
		slog.Bool("default", iso.Supported()), slog.Bool("local_allowed", h.localAllowed))
	if n, err := c.SweepStaleCgroups(); err != nil || n > 0 {
		log.Warn("swept the cgroups of dead runnel processes", slog.Int("removed", n), slog.Any("err", err))
	}
	if !cfg.KeepWorkspaces {
		if n, err := sandbox.SweepWorkspaces(cfg.WorkspaceRoot); err != nil || n > 0 {
			log.Warn("swept the workspaces of dead runnel processes", slog.Int("removed", n), slog.Any("err", err))
		}
	}
	h.tel, err = telemetry.New(telemetry.Options{Endpoint: cfg.OTLPEndpoint, Headers: cfg.OTLPHeaders, Version: version, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("trace export: %w", err)
	}
	h.agents = cfg.registry()
	// An agent's HOME holds the run's model key: a dead runnel's are
	// swept like its workspaces, whatever KeepWorkspaces says.
	if n, err := sandbox.SweepWorkspaces(h.agents.HomeRoot()); err != nil || n > 0 {
		log.Warn("swept the agent homes of dead runnel processes", slog.Int("removed", n), slog.Any("err", err))
	}
	for _, st := range h.agents.List() {
		if st.Installed {
			log.Info("ACP agent", slog.String("harness", st.Name), slog.String("version", st.Version))
		}
	}
	if h.root {
		log.Warn("runnel runs as root: the processes a local run starts (bash) can read runnel's memory and so other runs' credentials; run runnel as an unprivileged user")
	}
	return h, nil
}

// close ends whatever the runs' commands left, once the runs are over.
func (h *host) close(log *slog.Logger) {
	// Spans still queued get a few seconds; a dead collector costs no
	// more.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.tel.Close(ctx); err != nil {
		log.Warn("trace export", slog.Any("err", err))
	}
	_ = h.warm.Close()
	if h.outbound != nil {
		h.outbound.CloseIdleConnections()
	}
	if err := h.containment.Close(); err != nil {
		log.Warn("process containment", slog.Any("err", err))
	}
	if err := h.isolator.Close(); err != nil {
		log.Warn("isolated sandbox", slog.Any("err", err))
	}
}

// outboundClient is the client of run.Options.HTTPClient: nil (the
// default) where no transport was set up.
func (h *host) outboundClient() *http.Client {
	if h.outbound == nil {
		return nil
	}
	return &http.Client{Transport: h.outbound}
}

// sandboxInfo is what /v1/capabilities says about the local sandbox.
func (h *host) sandboxInfo() *server.SandboxInfo {
	separation := "runnel is not dumpable and runs as an unprivileged user: a local run's processes cannot read runnel's memory or environment, but they run as runnel's user and can read whatever that user can"
	switch {
	case runtime.GOOS != "linux":
		separation = "none: a local run's processes run as runnel's user on this host"
	case h.root:
		separation = "none: runnel runs as root, so a local run's processes can read runnel's memory and other runs' credentials; run runnel as an unprivileged user"
	}
	backends := []string{"local"}
	if h.isolator.Supported() {
		backends = append(backends, "isolated")
	}
	var limits map[string]server.LimitInfo
	var policies map[string][]string
	def := "local"
	if h.isolator.Supported() {
		def = "isolated"
		policies = map[string][]string{"filesystem": {"on", "readonly", "off"}, "network": {"on", "off", "allowlist"}}
		bounds := h.isolator.Bounds(h.containment)
		enforced := func(field string, limit int64) server.LimitInfo {
			by := bounds[field]
			if by == "" {
				by = "not enforced on this host"
			}
			return server.LimitInfo{Limit: limit, EnforcedBy: by}
		}
		limits = map[string]server.LimitInfo{
			"processes":   enforced("processes", int64(h.limits.Processes)),
			"memoryBytes": enforced("memory", h.limits.Memory),
			"cpuSeconds":  enforced("cpu", int64(h.limits.CPU/time.Second)),
		}
	}
	return &server.SandboxInfo{
		Backends:           backends,
		Isolated:           h.isolator.Detail(),
		IsolatedLimits:     limits,
		IsolatedPolicies:   policies,
		Default:            def,
		LocalAllowed:       h.localAllowed,
		ProcessContainment: string(h.containment.Mechanism()),
		Guarantee:          h.containment.Guarantee(),
		LocalSeparation:    separation,
	}
}

// agentInfo is what /v1/capabilities says about the ACP agents.
func (h *host) agentInfo() []server.AgentInfo {
	var out []server.AgentInfo
	for _, st := range h.agents.List() {
		out = append(out, server.AgentInfo{Harness: st.Name, Aliases: st.Aliases, Package: st.Package, Pinned: st.Pinned,
			Installed: st.Installed, Version: st.Version, Problem: st.Problem})
	}
	return out
}

// errNotDumpable wraps a failure to mark the process non-dumpable.
var errNotDumpable = errors.New("cannot mark runnel non-dumpable")
