// Package mcp connects a run to its users' MCP servers (DESIGN §4.6)
// through the official Go SDK: plan-time validation of the request's
// mcpServers, a URL guard that keeps runnel off loopback, private and
// cloud-metadata addresses, and a pool of client sessions whose tools the
// run offers to the model as mcp__<server>__<tool>.
//
//	specs, err := mcp.Normalize(req.McpServers, mcp.GuardOptions{HostAllowlist: cfg.MCPHostAllowlist})
//	if err != nil {
//		return err // a *runnel.Error naming the server and the rule
//	}
//	pool := mcp.Connect(ctx, specs, &mcp.Options{Guard: guard})
//	defer pool.Close() // every session, whatever happened
//	for _, n := range pool.Notices() {
//		emit(runnel.Event{Type: runnel.EventNotice, Text: n}) // a server left out, and why
//	}
//	for _, t := range pool.Tools() {
//		offer(t.QualifiedName, t.Description, t.InputSchema)
//	}
//	res, err := pool.Call(ctx, "mcp__memory__read_graph", args)
//
// # The guard
//
// A server URL must be https, and its host must resolve only to public
// addresses: not loopback, private (RFC 1918, fc00::/7), link-local,
// cloud metadata (169.254.169.254, fd00:ec2::254, 100.100.100.200,
// metadata.google.internal), unspecified, carrier-grade NAT, multicast or
// reserved, nor an IPv4-mapped or NAT64 IPv6 form of one. Hosts in
// RUNNEL_MCP_HOST_ALLOWLIST are exempt from both rules. Normalize applies
// what needs no network (scheme, literal addresses, localhost and the
// metadata names); the dialer resolves names itself, refuses a host when
// any of its addresses is forbidden, and checks the address again in the
// socket's Control hook just before connecting, so a DNS answer that
// changes between the check and the dial (rebinding) is caught. No proxy
// is used, and redirects are followed only to the same host.
//
// # Bounds
//
// A user's server is untrusted input. Every response body runnel reads
// from it goes through the server's round tripper, which bounds it before
// the SDK sees it (limits.go): one message (a JSON answer, one event of a
// stream) is at most Options.MaxMessageBytes, 4 MiB by default, like a
// callback response; what a server sends while runnel waits for one
// answer (notifications, events, resumed streams) is at most
// Options.MaxStreamBytes, 16 MiB; a server lists at most Options.MaxTools
// tools, 512. Past a bound the rest is not read: a JSON-RPC error answer
// takes its place, so a tool call fails with a sentence for the model
// ("the answer to "x" is larger than 4 MiB, …") and the session goes on,
// and an initialize or tools/list over a bound leaves the server out with
// a notice saying which bound. On the SSE transport one stream carries
// every answer, so there the stream bound counts the bytes between two
// answers, and passing it ends the session.
//
// # Secrets in URLs
//
// Providers put credentials in the URL (https://host/mcp/<key>/sse,
// ?api_key=…, user info), so notices, errors and the SDK's log show a URL
// as its origin only, scheme://host[:port], and a tool result has the
// configured URL's secrets replaced. SecretURLParts names those secrets for
// the run's redactor. Every request stays on the origin of the server's
// URL, with or without redirects: an SSE endpoint event naming another
// origin (or plain http for an https server) is refused before the
// server's headers go anywhere.
//
// # Transports
//
// Streamable HTTP, falling back to the older SSE transport when the
// server answers the initialize POST with a 4xx other than 401, 403, 407,
// 408 or 429 (the spec's backwards-compatibility rule), or directly when
// the connection type is "sse". Each server gets its own http.Transport,
// so closing a server closes its connections and their goroutines.
package mcp
