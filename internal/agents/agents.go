// Package agents knows the ACP agents runnel can run (DESIGN §7): how to
// install each one (a pinned npm package, installed by `runnel agents
// install <name>` into the agents directory), how to find it, and how to
// start it offline for one run: a HOME of its own with the agent's config,
// a scrubbed environment carrying only the run's model credentials, and
// the session mode that routes every gated call through
// session/request_permission.
//
//	reg := agents.NewRegistry(agents.Options{Dir: dir})
//	a, err := reg.Resolve("pi_core") // an alias of pi
//	if err != nil {
//		return err // not installed: the error names the install command
//	}
//	launcher, err := a.Launcher(agents.Run{Model: model, Workspace: ws.Dir()})
//
// The recipes (recipes.go) follow ../shared/ACP-AGENTS.md, which records
// how each agent was seen to start offline and what it sends.
package agents

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/runnel/runnel/internal/harness/acp"
)

// packages holds one pinned npm project (package.json and its lock file)
// per agent: what `runnel agents install` installs, exactly.
//
//go:embed packages
var packages embed.FS

// Options configures a Registry.
type Options struct {
	// Dir is the agents directory (RUNNEL_AGENTS_DIR); each agent is an
	// npm project in Dir/<name>.
	Dir string
	// Commands override an agent's command line by harness name
	// (RUNNEL_HARNESS_<NAME>_COMMAND), already split into words.
	Commands map[string][]string
	// HomeRoot is where each run's agent HOME is made (default:
	// os.TempDir()/runnel-homes).
	HomeRoot string
	// LookPath finds a program on runnel's PATH (default exec.LookPath);
	// node and npm are found with it.
	LookPath func(string) (string, error)
}

// Registry is the set of known agents. It is safe for concurrent use.
type Registry struct {
	opts  Options
	specs []*spec
}

// NewRegistry returns the registry of the agents runnel knows.
func NewRegistry(opts Options) *Registry {
	if opts.LookPath == nil {
		opts.LookPath = exec.LookPath
	}
	if opts.HomeRoot == "" {
		opts.HomeRoot = filepath.Join(os.TempDir(), "runnel-homes")
	}
	return &Registry{opts: opts, specs: recipes()}
}

// DefaultDir is the agents directory when RUNNEL_AGENTS_DIR is unset.
func DefaultDir() string {
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "runnel", "agents")
	}
	return filepath.Join(os.TempDir(), "runnel-agents")
}

// Names are the harness names of every known agent, aliases included.
func (r *Registry) Names() []string { return names(r.specs) }

// Harnesses are the harness names of every agent runnel knows.
func Harnesses() []string { return names(recipes()) }

func names(specs []*spec) []string {
	var out []string
	for _, s := range specs {
		out = append(out, s.name)
		out = append(out, s.aliases...)
	}
	return out
}

// Canonical is the agent name of a harness name: an alias resolved
// ("pi_core" is "pi").
func Canonical(name string) string {
	for _, s := range recipes() {
		if s.name == name || slices.Contains(s.aliases, name) {
			return s.name
		}
	}
	return name
}

// HomeRoot is where run HOMEs are made, for start-up sweeps.
func (r *Registry) HomeRoot() string { return r.opts.HomeRoot }

func (r *Registry) lookup(name string) *spec {
	name = strings.ToLower(strings.TrimSpace(name))
	for _, s := range r.specs {
		if s.name == name || slices.Contains(s.aliases, name) {
			return s
		}
	}
	return nil
}

// Known reports whether name is a known harness (installed or not).
func (r *Registry) Known(name string) bool { return r.lookup(name) != nil }

// Agent is an installed agent, ready to launch.
type Agent struct {
	reg  *Registry
	spec *spec
	// argv is the command line that starts it, before the recipe's own
	// arguments; node is Node's directory when the agent needs its own.
	argv    []string
	nodeDir string
	version string
}

// Name is the agent's harness name.
func (a *Agent) Name() string { return a.spec.name }

// Version is the installed version, or "custom" for an overridden command.
func (a *Agent) Version() string { return a.version }

// Resolve finds the installed agent for a harness name. Its error says
// what to do: the exact install command, or the override that failed.
func (r *Registry) Resolve(name string) (*Agent, error) {
	s := r.lookup(name)
	if s == nil {
		return nil, fmt.Errorf("unknown harness %q; the known ones are %s", name, strings.Join(r.Names(), ", "))
	}
	if cmd, ok := r.opts.Commands[s.name]; ok {
		if len(cmd) == 0 {
			return nil, fmt.Errorf("RUNNEL_HARNESS_%s_COMMAND is empty", strings.ToUpper(s.name))
		}
		if _, err := r.opts.LookPath(cmd[0]); err != nil {
			return nil, fmt.Errorf("RUNNEL_HARNESS_%s_COMMAND names %q, which cannot be run (%v)", strings.ToUpper(s.name), cmd[0], err)
		}
		return &Agent{reg: r, spec: s, argv: cmd, version: "custom"}, nil
	}
	notInstalled := fmt.Errorf("it is not installed on this runnel: run `runnel agents install %s` (it installs %s@%s into %s), or set RUNNEL_HARNESS_%s_COMMAND", s.name, s.pkg, s.version, r.dir(s), strings.ToUpper(s.name))
	entry := filepath.Join(r.dir(s), "node_modules", filepath.FromSlash(s.entry))
	if _, err := os.Stat(entry); err != nil {
		return nil, notInstalled
	}
	a := &Agent{reg: r, spec: s, version: r.installedVersion(s)}
	switch {
	case s.binary:
		a.argv = []string{entry}
	case s.ownNode != "":
		node := filepath.Join(r.dir(s), "node_modules", filepath.FromSlash(s.ownNode))
		if _, err := os.Stat(node); err != nil {
			return nil, notInstalled
		}
		a.nodeDir = filepath.Dir(node)
		if s.pathDir != "" {
			a.nodeDir = filepath.Join(r.dir(s), "node_modules", filepath.FromSlash(s.pathDir))
		}
		a.argv = []string{node, entry}
	default:
		node, err := r.opts.LookPath("node")
		if err != nil {
			return nil, errors.New("it needs Node.js, and runnel finds no node on its PATH")
		}
		a.nodeDir = filepath.Dir(node)
		a.argv = []string{node, entry}
	}
	return a, nil
}

func (r *Registry) dir(s *spec) string { return filepath.Join(r.opts.Dir, s.name) }

// installedVersion is the version of the agent's package in its
// node_modules, or "" when it cannot be read.
func (r *Registry) installedVersion(s *spec) string {
	b, err := os.ReadFile(filepath.Join(r.dir(s), "node_modules", filepath.FromSlash(s.pkg), "package.json"))
	if err != nil {
		return ""
	}
	return jsonVersion(b)
}

// Status is one agent as `runnel agents list`, /health and
// /v1/capabilities report it.
type Status struct {
	Name      string   `json:"name"`
	Aliases   []string `json:"aliases,omitempty"`
	Package   string   `json:"package"`
	Pinned    string   `json:"pinned"`
	Installed bool     `json:"installed"`
	Version   string   `json:"version,omitempty"`
	// Problem says why an agent is not installed, with what to run.
	Problem string `json:"problem,omitempty"`
}

// List reports every known agent.
func (r *Registry) List() []Status {
	var out []Status
	for _, s := range r.specs {
		st := Status{Name: s.name, Aliases: s.aliases, Package: s.pkg, Pinned: s.version}
		if a, err := r.Resolve(s.name); err == nil {
			st.Installed, st.Version = true, a.version
		} else {
			st.Problem = err.Error()
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Install installs the pinned package of the named agent into the
// agents directory with `npm ci` (exact versions from the lock file that
// runnel carries), writing npm's output to out.
func (r *Registry) Install(ctx context.Context, name string, out io.Writer) error {
	s := r.lookup(name)
	if s == nil {
		return fmt.Errorf("unknown agent %q; the known ones are %s", name, strings.Join(r.Names(), ", "))
	}
	npm, err := r.opts.LookPath("npm")
	if err != nil {
		return errors.New("installing an agent needs npm, and runnel finds no npm on its PATH")
	}
	dir := r.dir(s)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	for _, f := range []string{"package.json", "package-lock.json"} {
		b, err := fs.ReadFile(packages, "packages/"+s.name+"/"+f)
		if err != nil {
			return fmt.Errorf("runnel carries no %s for %s: %w", f, s.name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", f, err)
		}
	}
	cmd := exec.CommandContext(ctx, npm, "ci", "--prefix", dir, "--no-audit", "--no-fund")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm ci for %s failed: %w", s.name, err)
	}
	if _, err := r.Resolve(s.name); err != nil {
		return fmt.Errorf("npm ci for %s finished, but the agent is still not usable: %w", s.name, err)
	}
	return nil
}

// jsonVersion reads "version" from a package.json.
func jsonVersion(b []byte) string {
	var pkg struct {
		Version string `json:"version"`
	}
	if json.Unmarshal(b, &pkg) != nil {
		return ""
	}
	return pkg.Version
}

// Launcher prepares this agent's start for one run.
func (a *Agent) Launcher(run Run) (acp.Launcher, error) {
	if err := a.spec.check(run); err != nil {
		return nil, err
	}
	return &launcher{agent: a, run: run}, nil
}
