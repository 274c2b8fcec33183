// Package netguard classifies network addresses: the loopback, private,
// link-local, metadata and other non-public ranges that runnel's outgoing
// connections (MCP servers, the sandbox's egress proxy) refuse unless an
// operator or a run's allowlist admits them.
package netguard

import "net/netip"

// The address classes runnel refuses to reach unless told to, as the noun phrase a message uses.
const (
	KindUnspecified = "an unspecified address"
	KindLoopback    = "a loopback address"
	KindMetadata    = "a cloud metadata address"
	KindLinkLocal   = "a link-local address"
	KindPrivate     = "a private address"
	KindCGNAT       = "a carrier-grade NAT (shared) address"
	KindMulticast   = "a multicast address"
	KindReserved    = "a reserved address"
)

// Classify returns the class of an address runnel refuses to connect to,
// or "" for a public address. IPv4-mapped IPv6 (::ffff:127.0.0.1) and NAT64
// (64:ff9b::7f00:1, which a NAT64 gateway turns into 127.0.0.1 on its side)
// are judged by the IPv4 address they carry.
func Classify(a netip.Addr) string {
	a = a.WithZone("")
	if a.Is4In6() {
		a = a.Unmap()
	}
	if a.Is6() && netip.MustParsePrefix("64:ff9b::/96").Contains(a) {
		b := a.As16()
		a = netip.AddrFrom4([4]byte(b[12:16]))
	}
	// The cloud instance-metadata endpoints (AWS, GCP, Azure and others;
	// AWS over IPv6; Alibaba Cloud) come before their enclosing ranges so
	// the message says what they are.
	switch a {
	case netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("fd00:ec2::254"),
		netip.MustParseAddr("100.100.100.200"):
		return KindMetadata
	}
	// Checked in order; the first match names the class.
	ranges := [...]struct {
		prefix string
		kind   string
	}{
		{"0.0.0.0/8", KindUnspecified}, // "this network"; 0.0.0.0 dials the local host
		{"127.0.0.0/8", KindLoopback},
		{"10.0.0.0/8", KindPrivate},
		{"172.16.0.0/12", KindPrivate},
		{"192.168.0.0/16", KindPrivate},
		{"169.254.0.0/16", KindLinkLocal},
		{"100.64.0.0/10", KindCGNAT},
		{"192.0.0.0/24", KindReserved},  // IETF protocol assignments
		{"198.18.0.0/15", KindReserved}, // benchmarking, often used internally
		{"224.0.0.0/4", KindMulticast},
		{"240.0.0.0/4", KindReserved}, // includes the broadcast address
		{"::/128", KindUnspecified},
		{"::1/128", KindLoopback},
		{"::/96", KindReserved}, // deprecated IPv4-compatible addresses
		{"fc00::/7", KindPrivate},
		{"fec0::/10", KindPrivate}, // deprecated site-local
		{"fe80::/10", KindLinkLocal},
		{"ff00::/8", KindMulticast},
	}
	for _, r := range ranges {
		if netip.MustParsePrefix(r.prefix).Contains(a) {
			return r.kind
		}
	}
	return ""
}
