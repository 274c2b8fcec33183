package provider

import (
	"net/http"
	"time"
)

// NewTransport is the transport runnel reaches model APIs with: the
// standard library's default (proxy from the environment, dial and TLS
// handshake timeouts, HTTP/2 negotiated over TLS, which every hosted
// provider speaks), with two changes for a process that holds many runs
// against one provider at once:
//
//   - HTTP/2 connections are pinged when they fall silent: the runs of a
//     process share one connection per provider, so a connection that died
//     without a FIN (a NAT or balancer dropped it) would otherwise take
//     every new call of every run with it until each call's own deadline.
//     An unanswered ping closes it, and the next call dials afresh.
//   - Up to 64 idle HTTP/1.1 connections are kept per host, not 2: a
//     provider without HTTP/2 (a local vLLM or Ollama, a proxy) would
//     otherwise see a new TCP and TLS handshake for most model calls as
//     soon as more than two runs are in flight.
//   - At most 1,024 connections per host. When every HTTP/2 connection is
//     at the server's stream limit, the standard library dials one new
//     connection for each call waiting, not one for all of them: a burst
//     of thousands of runs ran the process out of descriptors
//     (docs/benchmarks.md, Benchmark 6). Past the bound a call waits for
//     a connection; over HTTP/2 that is hundreds of thousands of streams,
//     over HTTP/1.1 1,024 calls in flight to one provider.
//   - An HTTP/1.1 connection reads through a 1 KiB buffer, not 4 KiB: it
//     stays with its run for as long as the run waits on its model (a
//     connection per run, for minutes), while what it reads is a stream
//     of small events, and the adapters buffer their own lines
//     (NewEventReader). The write buffer keeps its 4 KiB: a request body
//     of a long conversation goes out through it, one write per buffer.
//     HTTP/2 connections are shared and keep their own buffers.
func NewTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ForceAttemptHTTP2 = true
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 64
	t.MaxConnsPerHost = 1024
	t.ReadBufferSize = 1 << 10
	t.HTTP2 = &http.HTTP2Config{
		SendPingTimeout: 15 * time.Second,
		PingTimeout:     15 * time.Second,
	}
	return t
}
