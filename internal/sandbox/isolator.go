package sandbox

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
