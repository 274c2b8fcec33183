package sandbox

import "slices"

// IsolatorOptions configures ProbeIsolator. The zero value finds bwrap on
// PATH and uses the running binary as the sandbox's init.
type IsolatorOptions struct {
	// Bwrap is the bubblewrap binary; empty means "bwrap" on PATH.
	Bwrap string
	// Helper is the binary that runs Init inside the sandbox when given
	// InitCommand as its first argument: runnel itself (the default, the
	// running executable), or a test binary that does the same.
	Helper string
}

// Isolator is the host's isolated backend: bubblewrap for the namespaces
// and mounts, landlock (where the kernel has it) as a second layer, set
// by Init inside. Probe it once at start-up; it is immutable.
type Isolator struct {
	bwrap, helper string
	landlock      bool
	landlockABI   int
	supported     bool
	detail        string
	// limiter bounds commands through cgroup v1, on a hybrid host.
	limiter *v1Limiter
}

// Close removes what the probe made (runnel's cgroup v1 bounds); every
// isolated command must be over.
func (i *Isolator) Close() error {
	if i == nil {
		return nil
	}
	return i.limiter.close()
}

// Bounds says how this host enforces each of Limits' fields for an
// isolated command, given the Containment its workspaces use: "cgroup v2",
// "cgroup v1", "rlimit" (per process), or "" when it cannot.
func (i *Isolator) Bounds(c *Containment) map[string]string {
	out := map[string]string{"cpu": "rlimit", "addressSpace": "rlimit"}
	for field, ctl := range map[string]string{"processes": "pids", "memory": "memory"} {
		switch {
		case c != nil && slices.Contains(c.controllers, ctl):
			out[field] = "cgroup v2"
		case i != nil && i.limiter.enforces(ctl):
			out[field] = "cgroup v1"
		default:
			out[field] = ""
		}
	}
	return out
}

// Supported reports whether the isolated sandbox works on this host.
func (i *Isolator) Supported() bool { return i != nil && i.supported }

// Detail says what was found, or why the isolated sandbox is not
// available, for the start-up log and /health.
func (i *Isolator) Detail() string {
	if i == nil {
		return "the isolated sandbox was not probed"
	}
	return i.detail
}
