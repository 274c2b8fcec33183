// Package egress is the isolated sandbox's way out (DESIGN §6): an HTTP
// CONNECT and SOCKS5 proxy on a unix socket that admits only what a run's
// network allowlist names. Programs in the sandbox have no route but
// loopback; a forwarder of runnel's inside relays the proxy address to the
// socket. Names are resolved here, never in the sandbox, and the address
// connected to is checked again, so a name that resolves somewhere the
// allowlist does not admit (DNS rebinding onto loopback, say) is refused.
package egress

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/runnel/runnel/internal/netguard"
)

// Allowlist is a run's network allowlist: host names ("api.openai.com"),
// wildcards ("*.openai.com": any name under it, not the bare domain) and
// addresses or CIDR ranges ("127.0.0.1", "10.0.0.0/8", "::1"). A name
// admits the public addresses it resolves to; a private, loopback or
// metadata address is reached only when an address entry admits it.
// Any port is allowed.
type Allowlist struct {
	names     map[string]bool
	wildcards []string // ".openai.com"
	prefixes  []netip.Prefix
}

// ParseAllowlist reads the entries of sandboxPermission.network.allowlist.
// An entry that is none of the three forms is an error naming it.
func ParseAllowlist(entries []string) (*Allowlist, error) {
	a := &Allowlist{names: map[string]bool{}}
	for _, raw := range entries {
		e := strings.ToLower(strings.TrimSpace(raw))
		switch {
		case e == "":
			return nil, fmt.Errorf("an allowlist entry is empty")
		case strings.Contains(e, "/"):
			p, err := netip.ParsePrefix(e)
			if err != nil {
				return nil, fmt.Errorf("allowlist entry %q is not a host name, *.domain, IP address or CIDR range (like 10.0.0.0/8)", raw)
			}
			a.prefixes = append(a.prefixes, p.Masked())
		case isAddr(e):
			ip, _ := netip.ParseAddr(strings.Trim(e, "[]"))
			a.prefixes = append(a.prefixes, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
		case strings.HasPrefix(e, "*."):
			if !validName(e[2:]) {
				return nil, fmt.Errorf("allowlist entry %q is not a wildcard over a domain name (like *.example.com)", raw)
			}
			a.wildcards = append(a.wildcards, e[1:])
		case validName(strings.TrimSuffix(e, ".")):
			a.names[strings.TrimSuffix(e, ".")] = true
		default:
			return nil, fmt.Errorf("allowlist entry %q is not a host name, *.domain, IP address or CIDR range", raw)
		}
	}
	return a, nil
}

func isAddr(s string) bool {
	_, err := netip.ParseAddr(strings.Trim(s, "[]"))
	return err == nil
}

// validName is a DNS name of letters, digits, '-' and '.', with at most
// 63 characters per label.
func validName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
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

// admitsName reports whether a name entry or a wildcard covers host.
func (a *Allowlist) admitsName(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if a.names[host] {
		return true
	}
	for _, w := range a.wildcards {
		if strings.HasSuffix(host, w) {
			return true
		}
	}
	return false
}

// admitsAddr reports whether an address entry covers ip.
func (a *Allowlist) admitsAddr(ip netip.Addr) bool {
	ip = ip.Unmap().WithZone("")
	for _, p := range a.prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// admits decides one address reached for host (a name, or the address
// itself): an address entry admits it, or a name entry does when the
// address is public. It returns why not, or "".
func (a *Allowlist) admits(host string, ip netip.Addr) string {
	if a.admitsAddr(ip) {
		return ""
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return fmt.Sprintf("%s is not on the allowlist", ip)
	}
	if !a.admitsName(host) {
		return fmt.Sprintf("%s is not on the allowlist", host)
	}
	if kind := netguard.Classify(ip); kind != "" {
		return fmt.Sprintf("%s resolves to %s, %s, which only an address entry of the allowlist admits", host, ip, kind)
	}
	return ""
}

// Covers reports whether an entry names host (a name or an address) at
// all, before any resolution: whether a run may count on reaching it.
// A name still admits only the public addresses it resolves to.
func (a *Allowlist) Covers(host string) bool {
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return a.admitsAddr(ip)
	}
	return a.admitsName(host)
}
