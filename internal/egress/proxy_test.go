package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// names resolves made-up names to loopback addresses: the stand-ins for
// hosts on and off the allowlist. No test here sends a packet off
// loopback.
type names map[string]string

func (n names) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	a, ok := n[host]
	if !ok {
		return nil, fmt.Errorf("no such host %s", host)
	}
	return []netip.Addr{netip.MustParseAddr(a)}, nil
}

func TestParseAllowlist(t *testing.T) {
	for _, bad := range []string{"", "http://x.test", "10.0.0.0/33", "*.", "a..b", "-x.test", "*.*.test", "x.test:443"} {
		if _, err := ParseAllowlist([]string{bad}); err == nil {
			t.Errorf("%q: accepted", bad)
		} else if bad != "" && !strings.Contains(err.Error(), bad) {
			t.Errorf("%q: %v does not name the entry", bad, err)
		}
	}
	a, err := ParseAllowlist([]string{"API.Example.com", "*.corp.test", "10.0.0.0/8", "::1", "[::2]"})
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{
		"api.example.com": true, "api.example.com.": true, "x.api.example.com": false,
		"a.corp.test": true, "a.b.corp.test": true, "corp.test": false, "evilcorp.test": false,
	} {
		if got := a.admitsName(host); got != want {
			t.Errorf("admitsName(%s) = %v", host, got)
		}
	}
	for addr, want := range map[string]bool{"10.1.2.3": true, "11.0.0.1": false, "::1": true, "::ffff:10.0.0.1": true} {
		if got := a.admitsAddr(netip.MustParseAddr(addr)); got != want {
			t.Errorf("admitsAddr(%s) = %v", addr, got)
		}
	}
}

// upstream is a loopback server that answers every connection with its
// name, and counts them.
type upstream struct {
	addr string
	mu   sync.Mutex
	n    int
}

func startUpstream(t *testing.T, ip, name string) *upstream {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{addr: ln.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.n++
		u.mu.Unlock()
		io.WriteString(w, name)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return u
}

func (u *upstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.n
}

func startProxy(t *testing.T, entries []string, denied *[]string) string {
	t.Helper()
	a, err := ParseAllowlist(entries)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "proxy.sock")
	var mu sync.Mutex
	p, err := Listen(sock, a, &Options{
		Resolver: names{"allowed.test": "127.0.0.1", "rebound.test": "127.0.0.1", "forbidden.test": "127.0.0.2"},
		Denied: func(r string) {
			mu.Lock()
			*denied = append(*denied, r)
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return sock
}

// viaConnect asks the proxy for a tunnel to target and GETs / through it.
func viaConnect(t *testing.T, sock, target string) (string, error) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return "", fmt.Errorf("%d %s", resp.StatusCode, b)
	}
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	return readBody(br)
}

func readBody(br *bufio.Reader) (string, error) {
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// viaSocks does the same over SOCKS5, with a name or an IPv4 address.
func viaSocks(t *testing.T, sock, host string, port int) (string, error) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte{5, 1, 0})
	req := []byte{5, 1, 0}
	if a, err := netip.ParseAddr(host); err == nil {
		b := a.As4()
		req = append(append(req, 1), b[:]...)
	} else {
		req = append(append(req, 3, byte(len(host))), host...)
	}
	c.Write(append(req, byte(port>>8), byte(port)))
	br := bufio.NewReader(c)
	var rep [12]byte
	if _, err := io.ReadFull(br, rep[:12]); err != nil {
		return "", err
	}
	if rep[3] != 0 {
		return "", fmt.Errorf("socks reply %d", rep[3])
	}
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	return readBody(br)
}

func TestProxyAdmitsOnlyTheAllowlist(t *testing.T) {
	good := startUpstream(t, "127.0.0.1", "good")
	bad := startUpstream(t, "127.0.0.2", "bad")
	_, goodPort, _ := net.SplitHostPort(good.addr)
	_, badPort, _ := net.SplitHostPort(bad.addr)
	var port int
	fmt.Sscan(goodPort, &port)
	var badPortN int
	fmt.Sscan(badPort, &badPortN)

	var denied []string
	sock := startProxy(t, []string{"127.0.0.1/32", "allowed.test", "rebound.test"}, &denied)
	for _, c := range []struct {
		name string
		do   func() (string, error)
		want string // "" for refused
	}{
		{"CONNECT to an admitted address", func() (string, error) { return viaConnect(t, sock, good.addr) }, "good"},
		{"CONNECT to a name whose address is admitted", func() (string, error) { return viaConnect(t, sock, "allowed.test:"+goodPort) }, "good"},
		{"CONNECT to an address off the list", func() (string, error) { return viaConnect(t, sock, bad.addr) }, ""},
		{"CONNECT to a name off the list", func() (string, error) { return viaConnect(t, sock, "forbidden.test:"+badPort) }, ""},
		{"SOCKS5 to an admitted address", func() (string, error) { return viaSocks(t, sock, "127.0.0.1", port) }, "good"},
		{"SOCKS5 to a name off the list", func() (string, error) { return viaSocks(t, sock, "forbidden.test", badPortN) }, ""},
		{"SOCKS5 to an address off the list", func() (string, error) { return viaSocks(t, sock, "127.0.0.2", badPortN) }, ""},
	} {
		got, err := c.do()
		switch {
		case c.want != "" && (err != nil || got != c.want):
			t.Errorf("%s: %q, %v; want %q", c.name, got, err, c.want)
		case c.want == "" && err == nil:
			t.Errorf("%s: went through (%q)", c.name, got)
		}
	}
	if n := bad.count(); n != 0 {
		t.Errorf("the forbidden host got %d requests", n)
	}
	if len(denied) != 4 {
		t.Errorf("denials reported: %q, want 4", denied)
	}
	for _, d := range denied {
		if !strings.HasPrefix(d, "runnel's sandbox refused a connection to ") {
			t.Errorf("denial %q does not say what was refused", d)
		}
	}
}

// TestProxyRebinding: a name on the allowlist that resolves to loopback
// is refused unless an address entry admits loopback: the allowlist names
// a public service, and DNS must not turn it into the host's own ports.
func TestProxyRebinding(t *testing.T) {
	good := startUpstream(t, "127.0.0.1", "good")
	_, port, _ := net.SplitHostPort(good.addr)
	var denied []string
	sock := startProxy(t, []string{"rebound.test"}, &denied)
	if got, err := viaConnect(t, sock, "rebound.test:"+port); err == nil {
		t.Fatalf("a name resolving to loopback went through: %q", got)
	}
	if good.count() != 0 || len(denied) != 1 || !strings.Contains(denied[0], "a loopback address") {
		t.Errorf("requests %d, denials %q", good.count(), denied)
	}
}

// TestProxyPlainHTTP forwards an absolute-form request.
func TestProxyPlainHTTP(t *testing.T) {
	good := startUpstream(t, "127.0.0.1", "good")
	var denied []string
	sock := startProxy(t, []string{"127.0.0.1"}, &denied)
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: %s\r\nProxy-Connection: keep-alive\r\n\r\n", good.addr, good.addr)
	if got, err := readBody(bufio.NewReader(c)); err != nil || got != "good" {
		t.Errorf("plain HTTP: %q, %v", got, err)
	}
}
