package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestClassify(t *testing.T) {
	tests := map[string]string{
		"8.8.8.8":                "",
		"2606:4700::1111":        "",
		"100.63.255.255":         "",
		"100.128.0.1":            "",
		"172.32.0.1":             "",
		"127.0.0.1":              kindLoopback,
		"::1":                    kindLoopback,
		"::ffff:127.0.0.1":       kindLoopback,
		"64:ff9b::7f00:1":        kindLoopback,
		"64:ff9b::808:808":       "",
		"10.1.2.3":               kindPrivate,
		"172.31.255.255":         kindPrivate,
		"192.168.0.1":            kindPrivate,
		"fc00::1":                kindPrivate,
		"fec0::1":                kindPrivate,
		"169.254.0.1":            kindLinkLocal,
		"fe80::1%eth0":           kindLinkLocal,
		"169.254.169.254":        kindMetadata,
		"::ffff:169.254.169.254": kindMetadata,
		"fd00:ec2::254":          kindMetadata,
		"100.100.100.200":        kindMetadata,
		"0.0.0.0":                kindUnspecified,
		"0.1.2.3":                kindUnspecified,
		"::":                     kindUnspecified,
		"100.64.0.1":             kindCGNAT,
		"100.127.255.254":        kindCGNAT,
		"224.0.0.251":            kindMulticast,
		"ff02::fb":               kindMulticast,
		"255.255.255.255":        kindReserved,
		"::127.0.0.1":            kindReserved,
	}
	for addr, want := range tests {
		if got := classify(netip.MustParseAddr(addr)); got != want {
			t.Errorf("classify(%s) = %q, want %q", addr, got, want)
		}
	}
}

func TestParseHostAllowlist(t *testing.T) {
	got, err := ParseHostAllowlist(" MCP.internal , 10.0.0.5:8080,[::1]:9000,::1,,localhost.")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"mcp.internal", "10.0.0.5:8080", "[::1]:9000", "::1", "localhost"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range []string{"http://mcp.internal", "host:0", "host:99999", "a b", "user@host", "host/path"} {
		if _, err := ParseHostAllowlist(bad); err == nil || !strings.Contains(err.Error(), AllowlistVariable) {
			t.Errorf("ParseHostAllowlist(%q) = %v, want an error naming the variable", bad, err)
		}
	}
}

// fakeResolver answers each host from a script; the last answer repeats.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][]string // host -> one answer per lookup; "" is a failure
	lookups map[string]int
}

func (r *fakeResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lookups == nil {
		r.lookups = make(map[string]int)
	}
	script, ok := r.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	answer := script[min(r.lookups[host], len(script)-1)]
	r.lookups[host]++
	var out []net.IPAddr
	for a := range strings.SplitSeq(answer, ",") {
		out = append(out, net.IPAddr{IP: net.ParseIP(a)})
	}
	return out, nil
}

func (r *fakeResolver) count(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lookups[host]
}

// TestGuardResolvedAddresses connects to names whose DNS answers are
// forbidden. Nothing reaches the network: every answer is refused before
// a socket is opened.
func TestGuardResolvedAddresses(t *testing.T) {
	const public = "runnel only connects to public addresses unless the host is in RUNNEL_MCP_HOST_ALLOWLIST."
	resolver := &fakeResolver{answers: map[string][]string{
		"loop.test":      {"127.0.0.1"},
		"loop6.test":     {"::1"},
		"private.test":   {"10.0.0.5"},
		"meta.test":      {"169.254.169.254"},
		"mapped.test":    {"::ffff:192.168.1.10"},
		"cgnat.test":     {"100.64.1.1"},
		"mixed.test":     {"93.184.216.34,10.0.0.7"},
		"rebind.test":    {"93.184.216.34", "127.0.0.1"}, // public for the check, loopback for the dial
		"unspec.test":    {"0.0.0.0"},
		"linklocal.test": {"fe80::1"},
	}}
	tests := []struct{ host, want string }{
		{"loop.test", "resolves to 127.0.0.1, " + kindLoopback},
		{"loop6.test", "resolves to ::1, " + kindLoopback},
		{"private.test", "resolves to 10.0.0.5, " + kindPrivate},
		{"meta.test", "resolves to 169.254.169.254, " + kindMetadata},
		{"mapped.test", "resolves to 192.168.1.10, " + kindPrivate},
		{"cgnat.test", "resolves to 100.64.1.1, " + kindCGNAT},
		{"mixed.test", "resolves to 10.0.0.7, " + kindPrivate},
		{"rebind.test", "resolves to 127.0.0.1, " + kindLoopback},
		{"unspec.test", "resolves to 0.0.0.0, " + kindUnspecified},
		{"linklocal.test", "resolves to fe80::1, " + kindLinkLocal},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			u := "https://" + tt.host + "/mcp"
			pool := Connect(t.Context(), []ServerSpec{httpSpec("m", u)}, &Options{Guard: GuardOptions{Resolver: resolver}})
			defer pool.Close()
			want := []string{`MCP server "m" is unavailable for this run: https://` + tt.host + " " + tt.want + "; " + public}
			if diff := cmp.Diff(want, pool.Notices()); diff != "" {
				t.Errorf("notices (-want +got):\n%s", diff)
			}
		})
	}
	// The rebinding answer passed the first check; only the dial's own
	// lookup saw loopback, so the refusal above came from the dialer.
	if n := resolver.count("rebind.test"); n < 2 {
		t.Errorf("rebind.test was resolved %d time(s); the dial-time check did not run", n)
	}
}

func TestGuardResolutionFailure(t *testing.T) {
	pool := Connect(t.Context(), []ServerSpec{httpSpec("m", "https://nx.test/mcp")},
		&Options{Guard: GuardOptions{Resolver: &fakeResolver{}}})
	defer pool.Close()
	want := []string{`MCP server "m" is unavailable for this run: could not resolve the host of https://nx.test: lookup nx.test: no such host.`}
	if diff := cmp.Diff(want, pool.Notices()); diff != "" {
		t.Errorf("notices (-want +got):\n%s", diff)
	}
}

// TestDialControl checks the socket-level hook on its own: it is the last
// word, whatever produced the address being connected to.
func TestDialControl(t *testing.T) {
	u, _ := url.Parse("https://mcp.example.com/mcp")
	d := &guardedDialer{server: "m", shown: displayURL(u)}
	tests := map[string]string{
		"93.184.216.34:443":     "",
		"[2606:4700::1111]:443": "",
		"127.0.0.1:443":         `MCP server "m": https://mcp.example.com connects to 127.0.0.1, a loopback address; ` + publicOnly,
		"[::ffff:10.0.0.1]:443": `MCP server "m": https://mcp.example.com connects to ::ffff:10.0.0.1, a private address; ` + publicOnly,
		"[fe80::1%lo]:443":      `MCP server "m": https://mcp.example.com connects to fe80::1%lo, a link-local address; ` + publicOnly,
		"169.254.169.254:80":    `MCP server "m": https://mcp.example.com connects to 169.254.169.254, a cloud metadata address; ` + publicOnly,
		"not-an-address:443":    `MCP server "m": https://mcp.example.com dialled not-an-address:443, which is not an IP address and port; refusing to connect`,
	}
	for addr, want := range tests {
		err := d.control("tcp", addr, nil)
		var got string
		if err != nil {
			got = err.Error()
			var ge *GuardError
			if !errors.As(err, &ge) {
				t.Errorf("control(%s) = %T, want a *GuardError", addr, err)
			}
		}
		if got != want {
			t.Errorf("control(%s) = %q, want %q", addr, got, want)
		}
	}
}

// TestAllowlistedNameReachesLoopback shows the allowlist at work end to
// end: a name (with its port) that resolves to loopback, over http.
func TestAllowlistedNameReachesLoopback(t *testing.T) {
	f := newFixture(t, fixtureOptions{anyHost: true})
	u, _ := url.Parse(f.url)
	u.Host = "mcp.internal:" + u.Port()
	opts := &Options{Guard: GuardOptions{
		HostAllowlist: []string{"mcp.internal:" + u.Port()},
		Resolver:      &fakeResolver{answers: map[string][]string{"mcp.internal": {"127.0.0.1"}}},
	}}
	pool := Connect(t.Context(), []ServerSpec{httpSpec("local", u.String())}, opts)
	defer pool.Close()
	res, err := pool.Call(t.Context(), "mcp__local__echo", json.RawMessage(`{"text":"allowed"}`))
	if err != nil || res.Content != "echo: allowed" {
		t.Errorf("call = %+v, %v; notices %q", res, err, pool.Notices())
	}

	// The same name on another port is not allowlisted.
	other := *u
	other.Host = "mcp.internal:1"
	opts.Guard.HostAllowlist = []string{"mcp.internal:" + u.Port()}
	pool2 := Connect(t.Context(), []ServerSpec{{Name: "other", Transport: TransportHTTP, URL: "https://" + other.Host + "/mcp"}}, opts)
	defer pool2.Close()
	if n := pool2.Notices(); len(n) != 1 || !strings.Contains(n[0], "resolves to 127.0.0.1, a loopback address") {
		t.Errorf("notices = %q", n)
	}
}

// FuzzParseHostAllowlist checks that what the parser accepts it accepts
// again unchanged, and that an entry it returns allowlists its own host.
func FuzzParseHostAllowlist(f *testing.F) {
	for _, s := range []string{"mcp.internal", "10.0.0.5:8080,[::1]:9000", "::1", "A.B., c:1", "x:0", "[fe80::1%25eth0]:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		entries, err := ParseHostAllowlist(s)
		if err != nil {
			return
		}
		again, err := ParseHostAllowlist(strings.Join(entries, ","))
		if err != nil {
			t.Fatalf("re-parsing %q: %v", entries, err)
		}
		if diff := cmp.Diff(entries, again); diff != "" {
			t.Fatalf("not stable (-first +second):\n%s", diff)
		}
		g := GuardOptions{HostAllowlist: entries}
		for _, e := range entries {
			host, port, ok := splitAllowlistEntry(e)
			if !ok {
				t.Fatalf("entry %q does not split", e)
			}
			if !g.allowlisted(host, cmpOr(port, "443")) {
				t.Fatalf("entry %q does not allowlist its own host", e)
			}
		}
	})
}
