package mcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/runnel/runnel/internal/netguard"
)

// AllowlistVariable names the setting that lets MCP connections reach a
// host the guard would refuse; messages name it so a reader knows the fix.
const AllowlistVariable = "RUNNEL_MCP_HOST_ALLOWLIST"

// Resolver looks up the addresses of a host name. *net.Resolver satisfies
// it; tests inject a fake to make "a name resolving to loopback" happen
// without real DNS.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// GuardOptions configures the URL guard of MCP connections. The zero value
// is the strict default: https only, public addresses only, the system
// resolver.
type GuardOptions struct {
	// HostAllowlist lists hosts (names or IP literals, optionally with a
	// port) that may be reached over http and at any address, loopback and
	// private included: the way tests and on-premises deployments reach
	// local servers. See ParseHostAllowlist.
	HostAllowlist []string
	// Resolver resolves host names; nil is net.DefaultResolver.
	Resolver Resolver
}

func (o GuardOptions) resolver() Resolver {
	if o.Resolver == nil {
		return net.DefaultResolver
	}
	return o.Resolver
}

// ParseHostAllowlist reads RUNNEL_MCP_HOST_ALLOWLIST: comma-separated
// hostnames or IP addresses, each optionally with a port ("mcp.internal",
// "10.0.0.5:8080", "[::1]:9000", "::1"). It returns the entries in the form
// GuardOptions.HostAllowlist matches (lower case, IPv6 unbracketed when
// there is no port), or an error naming the first bad entry.
func ParseHostAllowlist(s string) ([]string, error) {
	var out []string
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		host, port, ok := splitAllowlistEntry(entry)
		if !ok {
			return nil, fmt.Errorf("%s entry %q is not a hostname or IP address with an optional port (like mcp.internal, 10.0.0.5:8080 or [::1]:9000)", AllowlistVariable, entry)
		}
		if port != "" {
			out = append(out, net.JoinHostPort(host, port))
		} else {
			out = append(out, host)
		}
	}
	return out, nil
}

// splitAllowlistEntry splits an entry into a normalised host and an
// optional port, reporting whether it is well formed.
func splitAllowlistEntry(entry string) (host, port string, ok bool) {
	entry = strings.ToLower(strings.TrimSpace(entry))
	if strings.Contains(entry, "/") || strings.Contains(entry, "@") {
		return "", "", false
	}
	if a, err := netip.ParseAddr(entry); err == nil && plainZone(a.Zone()) { // a bare IP, v6 included
		return a.String(), "", true
	}
	host, port = entry, ""
	if h, p, err := net.SplitHostPort(entry); err == nil {
		if n, err := parsePort(p); err != nil || n == 0 {
			return "", "", false
		}
		host, port = h, p
	}
	host = normalizeHost(host)
	if a, err := netip.ParseAddr(host); err == nil {
		if !plainZone(a.Zone()) {
			return "", "", false
		}
		return a.String(), port, true
	}
	if !validHostname(host) {
		return "", "", false
	}
	return host, port, true
}

// plainZone reports whether an IPv6 zone (none, or an interface's name or
// index) reads back the same from an entry and from a host: netip takes
// any bytes, but an entry is trimmed of spaces and a host of a final dot.
func plainZone(z string) bool {
	for _, c := range z {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return !strings.HasSuffix(z, ".")
}

func parsePort(p string) (int, error) {
	n := 0
	if p == "" || len(p) > 5 {
		return 0, errors.New("bad port")
	}
	for _, c := range p {
		if c < '0' || c > '9' {
			return 0, errors.New("bad port")
		}
		n = n*10 + int(c-'0')
	}
	if n > 65535 {
		return 0, errors.New("bad port")
	}
	return n, nil
}

func validHostname(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// normalizeHost lower-cases a host and drops a trailing dot, so
// "LOCALHOST." and "localhost" are the same host to every check.
func normalizeHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// allowlisted reports whether host (and port, when an entry names one) is
// in the allowlist. host is a URL or dial host: IPv6 without brackets.
func (o GuardOptions) allowlisted(host, port string) bool {
	host = normalizeHost(host)
	if a, err := netip.ParseAddr(host); err == nil {
		host = a.String()
	}
	for _, entry := range o.HostAllowlist {
		h, p, ok := splitAllowlistEntry(entry)
		if ok && h == host && (p == "" || p == port) {
			return true
		}
	}
	return false
}

// The address classes the guard refuses, as the noun phrase a message uses.
const (
	kindUnspecified = netguard.KindUnspecified
	kindLoopback    = netguard.KindLoopback
	kindMetadata    = netguard.KindMetadata
	kindLinkLocal   = netguard.KindLinkLocal
	kindPrivate     = netguard.KindPrivate
	kindCGNAT       = netguard.KindCGNAT
	kindMulticast   = netguard.KindMulticast
	kindReserved    = netguard.KindReserved
)

func classify(a netip.Addr) string { return netguard.Classify(a) }

// classifyName refuses host names that need no DNS to be known as local:
// localhost and the cloud metadata names.
func classifyName(host string) string {
	switch host = normalizeHost(host); {
	case host == "localhost" || strings.HasSuffix(host, ".localhost"):
		return kindLoopback
	case host == "metadata.google.internal" || host == "metadata.goog" || host == "metadata":
		return kindMetadata
	}
	return ""
}

// checkStaticURL applies the parts of the guard that need no network: the
// scheme, host names known to be local, and literal IP addresses. The
// returned sentence does not name the server; the caller prefixes it.
func checkStaticURL(u *url.URL, opts GuardOptions) string {
	shown := displayURL(u)
	if u.Scheme != "https" && u.Scheme != "http" {
		return fmt.Sprintf("%s is not an http(s) URL", shown)
	}
	host := u.Hostname()
	if host == "" {
		return fmt.Sprintf("%s has no host", shown)
	}
	if opts.allowlisted(host, urlPort(u)) {
		return ""
	}
	if u.Scheme != "https" {
		return fmt.Sprintf("%s uses http; runnel only connects to MCP servers over https unless the host is in %s", shown, AllowlistVariable)
	}
	if kind := classifyName(host); kind != "" {
		return fmt.Sprintf("%s names %s, %s; %s", shown, host, kind, publicOnly)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if kind := classify(a); kind != "" {
			return fmt.Sprintf("%s points at %s, %s; %s", shown, a, kind, publicOnly)
		}
	}
	return ""
}

const publicOnly = "runnel only connects to public addresses unless the host is in " + AllowlistVariable

// urlPort is the port a URL dials, explicit or implied by its scheme.
func urlPort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "http" {
		return "80"
	}
	return "443"
}

// GuardError is a connection the guard refused. Reason names the URL and
// the rule ("https://x resolves to 10.0.0.5, a private address; …"); the
// URL shows as its origin only (displayURL).
type GuardError struct {
	Server string
	Reason string
}

func (e *GuardError) Error() string { return fmt.Sprintf("MCP server %q: %s", e.Server, e.Reason) }

// guardedDialer dials one MCP server's host. It resolves names through the
// injected resolver, refuses a host if any of its addresses is forbidden,
// and checks again, in the socket's Control hook, the address the kernel
// is about to connect to: whatever resolved the name, DNS rebinding
// included, the connected address is the one that was judged.
type guardedDialer struct {
	server string
	shown  string // the server URL as messages show it
	opts   GuardOptions

	mu      sync.Mutex
	lastErr error // the last dial failure, for the notice (see lastDialError)
}

func (d *guardedDialer) refuse(format string, args ...any) *GuardError {
	return &GuardError{Server: d.server, Reason: d.shown + " " + fmt.Sprintf(format, args...)}
}

func (d *guardedDialer) record(err error) {
	d.mu.Lock()
	d.lastErr = err
	d.mu.Unlock()
}

// DialContext is the http.Transport dial function.
func (d *guardedDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := d.dial(ctx, network, addr)
	if err != nil {
		d.record(err)
	}
	return conn, err
}

// lastDialError returns the last dial failure. The SDK folds transport
// errors into strings of its own; keeping the dialer's error lets a notice
// say what actually went wrong.
func (d *guardedDialer) lastDialError() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lastErr
}

func (d *guardedDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	allowed := d.opts.allowlisted(host, port)
	if !allowed {
		if kind := classifyName(host); kind != "" {
			return nil, d.refuse("names %s, %s; %s", host, kind, publicOnly)
		}
	}
	addrs, err := d.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	if !allowed {
		for _, a := range addrs {
			if kind := classify(a); kind != "" {
				return nil, d.refuse("resolves to %s, %s; %s", a, kind, publicOnly)
			}
		}
	}
	dialer := net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	if !allowed {
		dialer.Control = d.control
	}
	var firstErr error
	for _, a := range addrs {
		conn, err := dialer.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return conn, nil
		}
		var ge *GuardError
		if errors.As(err, &ge) {
			return nil, ge
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("could not connect to %s: %w", d.shown, firstErr)
}

func (d *guardedDialer) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	ipAddrs, err := d.opts.resolver().LookupIPAddr(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("could not resolve the host of %s: %w", d.shown, err)
	}
	var addrs []netip.Addr
	for _, ia := range ipAddrs {
		// net.IP holds IPv4 in 16 bytes: unmap, or every IPv4 answer would
		// read as ::ffff:a.b.c.d in messages and dials. (A mapped AAAA
		// answer is the same address, judged the same way.)
		if a, ok := netip.AddrFromSlice(ia.IP); ok {
			addrs = append(addrs, a.Unmap().WithZone(ia.Zone))
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("could not resolve the host of %s: no addresses", d.shown)
	}
	return addrs, nil
}

// control runs after the socket is created and before it connects: the
// last word on which address is reached.
func (d *guardedDialer) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return d.refuse("dialled %s, which is not an IP address and port; refusing to connect", address)
	}
	if kind := classify(ap.Addr()); kind != "" {
		return d.refuse("connects to %s, %s; %s", ap.Addr(), kind, publicOnly)
	}
	return nil
}

// checkRedirect follows a redirect only within the server's origin (same
// scheme, host and port): a server must not bounce runnel, with the user's
// headers, somewhere else.
func (d *guardedDialer) checkRedirect(req *http.Request, via []*http.Request) error {
	var err *GuardError
	from, to := via[0].URL, req.URL
	switch {
	case len(via) >= 5:
		err = d.refuse("redirected more than 5 times")
	case !sameOrigin(from, to):
		err = d.refuse("redirected to another origin (%s); runnel only follows redirects within an MCP server's own scheme, host and port", displayURL(to))
	default:
		return nil
	}
	d.record(err)
	return err
}

// preflight resolves and judges the server's host before anything is
// sent, so a refused host fails with the guard's sentence rather than
// whatever the SDK makes of a dial error. The dialer judges again at dial
// time: a DNS answer may change in between.
func (d *guardedDialer) preflight(ctx context.Context, u *url.URL) error {
	host, port := u.Hostname(), urlPort(u)
	if d.opts.allowlisted(host, port) {
		return nil
	}
	addrs, err := d.resolve(ctx, host)
	if err != nil {
		return err
	}
	for _, a := range addrs {
		if kind := classify(a); kind != "" {
			return d.refuse("resolves to %s, %s; %s", a, kind, publicOnly)
		}
	}
	return nil
}
