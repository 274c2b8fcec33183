package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// probeTimeout bounds the trial run of the probe: a bwrap that hangs must
// not hold up runnel's start.
const probeTimeout = 10 * time.Second

// ProbeIsolator finds bubblewrap and the helper, and runs `true` through
// the whole chain once (namespaces, mounts, Init with landlock): a host
// where user namespaces are disabled, or bwrap is missing, gets an
// Isolator that is not Supported, whose Detail says why. It fails only
// when opts names a binary that does not exist: an operator who named
// one expects it used.
func ProbeIsolator(ctx context.Context, opts *IsolatorOptions) (*Isolator, error) {
	var o IsolatorOptions
	if opts != nil {
		o = *opts
	}
	i := &Isolator{}
	bw := o.Bwrap
	if bw == "" {
		p, err := exec.LookPath("bwrap")
		if err != nil {
			i.detail = "bubblewrap (bwrap) is not installed; on Debian: apt-get install bubblewrap"
			return i, nil
		}
		bw = p
	} else if _, err := os.Stat(bw); err != nil {
		return nil, fmt.Errorf("the bubblewrap binary %s: %w", bw, err)
	}
	helper := o.Helper
	if helper == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("finding runnel's own binary for the sandbox: %w", err)
		}
		helper = exe
	}
	var err error
	if i.bwrap, err = filepath.Abs(bw); err == nil {
		i.helper, err = filepath.EvalSymlinks(helper)
	}
	if err != nil {
		return nil, fmt.Errorf("locating the sandbox binaries: %w", err)
	}
	if abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION); errno == 0 && abi > 0 {
		i.landlock, i.landlockABI = true, int(abi)
	}
	if err := i.trial(ctx); err != nil {
		i.detail = "bubblewrap does not work here: " + err.Error()
		return i, nil
	}
	i.supported = true
	i.limiter = probeV1()
	i.detail = "bubblewrap " + i.bwrap + " (user, mount, pid, ipc, uts, network namespaces)"
	if i.landlock {
		i.detail += fmt.Sprintf(", landlock ABI %d", i.landlockABI)
	} else {
		i.detail += ", no landlock in this kernel (mounts only)"
	}
	return i, nil
}

// trial runs `true` isolated with every layer a run can ask for.
func (i *Isolator) trial(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "runnel-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	is := &Isolation{Isolator: i, Filesystem: FilesystemOff, Network: NetworkOff}
	argv := is.wrap(dir, dir, []string{"/bin/true"})
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=" + DefaultPath}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(out.String()))
	}
	return nil
}
