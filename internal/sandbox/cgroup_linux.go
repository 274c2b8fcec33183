package sandbox

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// cgroupPrefix starts the name of every cgroup runnel creates:
// runnel-<pid namespace>-<pid>-<start time>-<random>, so that a start-up
// sweep can tell a cgroup whose runnel process is gone from one whose
// runnel is alive (another replica, or this one).
const cgroupPrefix = "runnel-"

// mountInfo is one cgroup2 mount of /proc/self/mountinfo: the directory
// it is mounted on and the cgroup path that directory shows.
type mountInfo struct {
	root, mountPoint string
}

func cgroup2Mounts() ([]mountInfo, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading the mounts: %w", err)
	}
	defer f.Close()
	var mounts []mountInfo
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mount-point options... - fstype source ...
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || sep+1 >= len(fields) || fields[sep+1] != "cgroup2" {
			continue
		}
		mounts = append(mounts, mountInfo{root: unescapeMount(fields[3]), mountPoint: unescapeMount(fields[4])})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the mounts: %w", err)
	}
	return mounts, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ownCgroupDir finds the directory of the runnel process's own cgroup v2:
// its path in /proc/self/cgroup under a cgroup2 mount that shows it.
func ownCgroupDir() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("reading /proc/self/cgroup: %w", err)
	}
	var own string
	for line := range strings.SplitSeq(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			own = p
		}
	}
	if own == "" {
		return "", errors.New("the process is in no cgroup v2 hierarchy")
	}
	mounts, err := cgroup2Mounts()
	if err != nil {
		return "", err
	}
	for _, m := range mounts {
		if rel, ok := cutPathPrefix(own, m.root); ok {
			return filepath.Join(m.mountPoint, rel), nil
		}
	}
	return "", fmt.Errorf("no cgroup2 mount shows the process's cgroup %s", own)
}

// cgroupPathOf is how /proc/<pid>/cgroup names the cgroup at directory
// dir, so that a process can be matched to a cgroup, zombies included
// (they are no longer in cgroup.procs).
func cgroupPathOf(dir string) (string, error) {
	mounts, err := cgroup2Mounts()
	if err != nil {
		return "", err
	}
	best := -1
	for i, m := range mounts {
		if _, ok := cutPathPrefix(dir, m.mountPoint); ok && (best < 0 || len(m.mountPoint) > len(mounts[best].mountPoint)) {
			best = i
		}
	}
	if best < 0 {
		return "", fmt.Errorf("%s is not on a cgroup2 mount", dir)
	}
	rel, _ := cutPathPrefix(dir, mounts[best].mountPoint)
	return path.Join(mounts[best].root, rel), nil
}

// cutPathPrefix is strings.CutPrefix for whole path components.
func cutPathPrefix(p, prefix string) (string, bool) {
	if prefix == "/" {
		return p, strings.HasPrefix(p, "/")
	}
	if p == prefix {
		return "/", true
	}
	rest, ok := strings.CutPrefix(p, prefix+"/")
	return "/" + rest, ok
}

// cgroupOf reads the cgroup v2 path of a process, zombie or not.
func cgroupOf(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, nil
		}
	}
	return "", nil
}

// ownerName is the part of a cgroup name that identifies the runnel
// process: runnel-<pid namespace>-<pid>-<start time>-.
func ownerName(ns string, self proc) string {
	return fmt.Sprintf("%s%s-%d-%d-", cgroupPrefix, ns, self.pid, self.startTime)
}

// createCgroup makes runnel's own cgroup under parent and checks that it
// does what containment needs: cgroup.kill exists (Linux 5.14), and a
// process can be started straight into a child of it.
func createCgroup(parent, ns string, self proc) (string, error) {
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	dir := filepath.Join(parent, ownerName(ns, self)+hex.EncodeToString(suffix[:]))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating a cgroup: %w", err)
	}
	if err := checkCgroup(dir); err != nil {
		return "", errors.Join(err, removeCgroup(dir))
	}
	return dir, nil
}

func checkCgroup(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		return fmt.Errorf("the kernel has no cgroup.kill: %w", err)
	}
	probe := filepath.Join(dir, "probe")
	if err := os.Mkdir(probe, 0o755); err != nil {
		return fmt.Errorf("creating a cgroup: %w", err)
	}
	fd, err := syscall.Open(probe, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening a cgroup: %w", err)
	}
	defer syscall.Close(fd)
	cmd := exec.Command("/bin/sh", "-c", "exit 0")
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("starting a process in a cgroup: %w", err)
	}
	return removeCgroup(probe)
}

// killCgroup kills every process of the cgroup at dir and of its
// descendants. The kernel makes it race-free: a fork under way when it
// runs is killed too.
func killCgroup(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err != nil {
		return fmt.Errorf("killing the cgroup: %w", err)
	}
	return nil
}

// cgroupEmpty reports whether no live process is left in the cgroup at
// dir or below it.
func cgroupEmpty(dir string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		return false, fmt.Errorf("reading cgroup.events: %w", err)
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("populated ")); ok {
			return string(v) == "0", nil
		}
	}
	return false, errors.New("cgroup.events has no populated line")
}

// removeCgroup removes the cgroup at dir and its descendants, deepest
// first. A cgroup directory holds only the kernel's files, which go with
// it; rmdir fails while a live process is in it.
func removeCgroup(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("removing the cgroup: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if e.IsDir() {
			errs = append(errs, removeCgroup(filepath.Join(dir, e.Name())))
		}
	}
	if err := syscall.Rmdir(dir); err != nil && !errors.Is(err, syscall.ENOENT) {
		errs = append(errs, fmt.Errorf("removing the cgroup %s: %w", dir, err))
	}
	return errors.Join(errs...)
}

// staleOwner reports whether the cgroup named name was made by a runnel
// process that is gone: one in this pid namespace whose pid is free or
// belongs to a process started at another time. A name it cannot judge
// (another namespace, another format) is not stale.
func staleOwner(name, ns string) bool {
	rest, ok := strings.CutPrefix(name, cgroupPrefix)
	if !ok {
		return false
	}
	parts := strings.Split(rest, "-")
	if len(parts) != 4 || parts[0] != ns {
		return false
	}
	pid, err1 := strconv.Atoi(parts[1])
	start, err2 := strconv.ParseUint(parts[2], 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 {
		return false
	}
	p, err := readProc(pid)
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	return err == nil && p.startTime != start
}
