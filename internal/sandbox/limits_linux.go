package sandbox

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// v1Limiter bounds the processes and the memory of each isolated command
// through the cgroup v1 pids and memory controllers, on a host (a hybrid
// one) whose cgroup v2 tree, where commands are contained, has neither:
// a cgroup of runnel's own under each controller, and a child of it per
// command, which the sandbox's first process joins before it runs
// anything (bwrap waits on --block-fd until runnel has moved it).
type v1Limiter struct {
	dirs map[string]string // controller → runnel's cgroup
	seq  atomic.Uint64
}

// v1Controllers are the cgroup v1 controllers that bound a command.
var v1Controllers = []string{"pids", "memory"}

// probeV1 makes runnel's cgroups under the v1 hierarchies it may write,
// removing the empty ones runnel processes now gone left; nil when none
// can be used.
func probeV1() *v1Limiter {
	self, err1 := readProc(os.Getpid())
	ns, err2 := pidNamespace()
	if err1 != nil || err2 != nil {
		return nil
	}
	mounts, own := v1Mounts(), v1Own()
	l := &v1Limiter{dirs: map[string]string{}}
	for _, ctl := range v1Controllers {
		root, ok1 := mounts[ctl]
		p, ok2 := own[ctl]
		if !ok1 || !ok2 {
			continue
		}
		rel, ok := cutPathPrefix(p, root.root)
		if !ok {
			continue
		}
		parent := filepath.Join(root.mountPoint, rel)
		sweepV1(parent, ns)
		var suffix [4]byte
		_, _ = rand.Read(suffix[:])
		dir := filepath.Join(parent, ownerName(ns, self)+hex.EncodeToString(suffix[:]))
		if os.Mkdir(dir, 0o755) == nil {
			l.dirs[ctl] = dir
		}
	}
	if len(l.dirs) == 0 {
		return nil
	}
	return l
}

// v1Mounts are the cgroup v1 hierarchies of /proc/self/mountinfo, by
// controller.
func v1Mounts() map[string]mountInfo {
	out := map[string]mountInfo{}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if sep < 5 || sep+3 >= len(fields) || fields[sep+1] != "cgroup" {
			continue
		}
		for _, opt := range strings.Split(fields[sep+3], ",") {
			if slices.Contains(v1Controllers, opt) {
				out[opt] = mountInfo{root: unescapeMount(fields[3]), mountPoint: unescapeMount(fields[4])}
			}
		}
	}
	return out
}

// v1Own is runnel's own cgroup under each v1 controller.
func v1Own() map[string]string {
	out := map[string]string{}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return out
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, ctl := range strings.Split(parts[1], ",") {
			out[ctl] = parts[2]
		}
	}
	return out
}

// sweepV1 removes the cgroups that runnel processes now gone left under
// parent; one that still holds a process stays (rmdir refuses it).
func sweepV1(parent, ns string) {
	entries, _ := os.ReadDir(parent)
	for _, e := range entries {
		if e.IsDir() && staleOwner(e.Name(), ns) {
			_ = removeCgroup(filepath.Join(parent, e.Name()))
		}
	}
}

// close removes runnel's cgroups; every command is over by then.
func (l *v1Limiter) close() error {
	if l == nil {
		return nil
	}
	var errs []error
	for _, d := range l.dirs {
		errs = append(errs, removeCgroup(d))
	}
	return errors.Join(errs...)
}

// enforces names what the limiter bounds, for Isolator.Bounds.
func (l *v1Limiter) enforces(ctl string) bool { return l != nil && l.dirs[ctl] != "" }

// v1Scope is one command's cgroups, made before it starts.
type v1Scope struct {
	dirs []string
	// info and block are runnel's ends of bwrap's --info-fd and
	// --block-fd; the child's ends are in files.
	info, block *os.File
	files       []*os.File
}

// infoFD and blockFD are the descriptors bwrap is given: ExtraFiles
// start at 3.
const infoFD, blockFD = 3, 4

// scope makes the cgroups that bound one command by lim (the fields the
// cgroup v2 scope did not take), or returns nil when none is needed.
func (l *v1Limiter) scope(lim Limits) (*v1Scope, error) {
	if l == nil || lim.Processes <= 0 && lim.Memory <= 0 {
		return nil, nil
	}
	s := &v1Scope{}
	name := "cmd-" + strconv.FormatUint(l.seq.Add(1), 10)
	for _, ctl := range v1Controllers {
		var file string
		var value int64
		switch {
		case ctl == "pids" && lim.Processes > 0:
			file, value = "pids.max", int64(lim.Processes)
		case ctl == "memory" && lim.Memory > 0:
			file, value = "memory.limit_in_bytes", lim.Memory
		default:
			continue
		}
		if l.dirs[ctl] == "" {
			continue
		}
		d := filepath.Join(l.dirs[ctl], name)
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, errors.Join(fmt.Errorf("creating the command's %s cgroup: %w", ctl, err), s.remove())
		}
		s.dirs = append(s.dirs, d)
		if err := os.WriteFile(filepath.Join(d, file), []byte(strconv.FormatInt(value, 10)), 0); err != nil {
			return nil, errors.Join(fmt.Errorf("bounding the command's %s: %w", ctl, err), s.remove())
		}
		if ctl == "memory" {
			// No way around the bound through swap, where the kernel
			// accounts it; absent without swap accounting.
			_ = os.WriteFile(filepath.Join(d, "memory.memsw.limit_in_bytes"), []byte(strconv.FormatInt(value, 10)), 0)
		}
	}
	if len(s.dirs) == 0 {
		return nil, nil
	}
	infoR, infoW, err := os.Pipe()
	if err != nil {
		return nil, errors.Join(err, s.remove())
	}
	blockR, blockW, err := os.Pipe()
	if err != nil {
		infoR.Close()
		infoW.Close()
		return nil, errors.Join(err, s.remove())
	}
	s.info, s.block, s.files = infoR, blockW, []*os.File{infoW, blockR}
	return s, nil
}

// args are bwrap's flags for the hand-over.
func (s *v1Scope) args() []string {
	if s == nil {
		return nil
	}
	return []string{"--info-fd", strconv.Itoa(infoFD), "--block-fd", strconv.Itoa(blockFD)}
}

// prepare gives cmd the child's ends of the pipes.
func (s *v1Scope) prepare(cmd *exec.Cmd) {
	if s != nil {
		cmd.ExtraFiles = s.files
	}
}

// joinTimeout bounds the wait for bwrap to say which process is the
// sandbox's.
const joinTimeout = 10 * time.Second

// join moves the sandbox's first process into the command's cgroups once
// bwrap has started it, and lets it go on; everything it starts stays in
// them. Call it right after Start; on error the caller kills the command.
func (s *v1Scope) join() error {
	if s == nil {
		return nil
	}
	for _, f := range s.files {
		f.Close()
	}
	defer s.info.Close()
	defer s.block.Close()
	_ = s.info.SetReadDeadline(time.Now().Add(joinTimeout))
	b, err := io.ReadAll(io.LimitReader(s.info, 64<<10))
	if err != nil {
		return fmt.Errorf("reading bubblewrap's report: %w", err)
	}
	var info struct {
		ChildPID int `json:"child-pid"`
	}
	if err := json.Unmarshal(b, &info); err != nil || info.ChildPID <= 0 {
		return fmt.Errorf("bubblewrap reported no sandbox process (%q)", strings.TrimSpace(string(b)))
	}
	for _, d := range s.dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(info.ChildPID)), 0); err != nil {
			return fmt.Errorf("moving the sandbox into %s: %w", d, err)
		}
	}
	if _, err := s.block.Write([]byte{1}); err != nil {
		return fmt.Errorf("releasing the sandbox: %w", err)
	}
	return nil
}

// remove removes the command's cgroups once its processes are gone (the
// containment has ended them); the kernel may take a moment to let go of
// the last of them.
func (s *v1Scope) remove() error {
	if s == nil {
		return nil
	}
	for _, f := range append(s.files, s.info, s.block) {
		if f != nil {
			f.Close()
		}
	}
	var errs []error
	for _, d := range s.dirs {
		var err error
		for range 100 {
			if err = syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) {
				err = nil
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("removing the cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// limit bounds the command's cgroup v2 by lim where its controllers are
// enabled (pids.max, memory.max), and returns what is left for the v1
// limiter.
func (s *scope) limit(lim Limits) (Limits, error) {
	if s.cgroup == "" {
		return lim, nil
	}
	for _, b := range []struct {
		file  string
		value int64
		done  func()
	}{
		{"pids.max", int64(lim.Processes), func() { lim.Processes = 0 }},
		{"memory.max", lim.Memory, func() { lim.Memory = 0 }},
	} {
		if b.value <= 0 {
			continue
		}
		p := filepath.Join(s.cgroup, b.file)
		if _, err := os.Stat(p); err != nil {
			continue // the controller is not enabled here
		}
		if err := os.WriteFile(p, []byte(strconv.FormatInt(b.value, 10)), 0); err != nil {
			return lim, fmt.Errorf("bounding the command: %w", err)
		}
		b.done()
	}
	return lim, nil
}

// enableControllers lets the commands' cgroups under dir bound processes
// and memory, where the parent gave dir those controllers; it returns the
// ones enabled.
func enableControllers(dir string) []string {
	var on []string
	for _, ctl := range []string{"pids", "memory"} {
		if os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+"+ctl), 0) == nil {
			on = append(on, ctl)
		}
	}
	return on
}
