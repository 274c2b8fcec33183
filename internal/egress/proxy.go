package egress

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Resolver looks up a host name; *net.Resolver satisfies it, and tests
// give one that answers without DNS.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Options configures a Proxy.
type Options struct {
	// Resolver resolves names; nil is net.DefaultResolver.
	Resolver Resolver
	// Denied is told of every connection the allowlist refused, with a
	// sentence saying what and why; it must not block.
	Denied func(reason string)
	// DialTimeout bounds one connection attempt; zero is 30 seconds.
	DialTimeout time.Duration
}

// handshakeTimeout bounds how long a client may take to say where it
// wants to go: a sandboxed program that opens the socket and says nothing
// must not hold a goroutine for ever.
const handshakeTimeout = 30 * time.Second

// Proxy admits the connections a run's allowlist names. It listens on a
// unix socket that only the run's sandbox sees (bind-mounted in).
type Proxy struct {
	ln    net.Listener
	allow *Allowlist
	opts  Options

	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
	wg     sync.WaitGroup
}

// Listen starts a proxy on a new unix socket at path (mode 0600).
func Listen(path string, allow *Allowlist, opts *Options) (*Proxy, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 30 * time.Second
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("starting the egress proxy: %w", err)
	}
	p := &Proxy{ln: ln, allow: allow, opts: o, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Close stops the proxy, cuts every tunnel, and returns when all of its
// goroutines are gone.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			c.Close()
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.untrack(c)
			p.handle(c)
		}()
	}
}

// track records a connection so Close can cut it; false once closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = true
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// handle speaks SOCKS5 when the first byte is its version, HTTP
// otherwise.
func (p *Proxy) handle(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(handshakeTimeout))
	br := bufio.NewReader(c)
	first, err := br.Peek(1)
	if err != nil {
		return
	}
	if first[0] == 5 {
		p.socks(c, br)
		return
	}
	p.http(c, br)
}

// http serves one CONNECT, or one plain request in absolute form
// (http://host/path), which it passes on with Connection: close.
func (p *Proxy) http(c net.Conn, br *bufio.Reader) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	target := req.Host
	if req.Method != http.MethodConnect {
		if req.URL.Scheme != "http" || req.URL.Host == "" {
			writeStatus(c, http.StatusBadRequest, "runnel's egress proxy takes CONNECT or absolute http:// requests")
			return
		}
		target = req.URL.Host
		if req.URL.Port() == "" {
			target = net.JoinHostPort(req.URL.Hostname(), "80")
		}
	}
	up, reason := p.dial(target)
	if up == nil {
		writeStatus(c, http.StatusForbidden, reason)
		return
	}
	if !p.track(up) {
		up.Close()
		return
	}
	defer p.untrack(up)
	_ = c.SetDeadline(time.Time{})
	if req.Method == http.MethodConnect {
		if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			return
		}
	} else {
		req.Header.Del("Proxy-Connection")
		req.Header.Del("Proxy-Authorization")
		req.Close = true
		if err := req.Write(up); err != nil {
			return
		}
	}
	splice(c, br, up)
}

func writeStatus(c net.Conn, code int, reason string) {
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, http.StatusText(code), len(reason), reason)
}

// SOCKS5 replies (RFC 1928).
const (
	socksOK         = 0
	socksFailure    = 1
	socksNotAllowed = 2
	socksNoCommand  = 7
	socksNoAddrType = 8
)

// socks serves one SOCKS5 CONNECT without authentication.
func (p *Proxy) socks(c net.Conn, br *bufio.Reader) {
	var hdr [2]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return
	}
	if _, err := c.Write([]byte{5, 0}); err != nil {
		return
	}
	var req [4]byte
	if _, err := io.ReadFull(br, req[:]); err != nil || req[0] != 5 {
		return
	}
	if req[1] != 1 {
		socksReply(c, socksNoCommand)
		return
	}
	var host string
	switch req[3] {
	case 1, 4:
		b := make([]byte, map[byte]int{1: 4, 4: 16}[req[3]])
		if _, err := io.ReadFull(br, b); err != nil {
			return
		}
		a, _ := netip.AddrFromSlice(b)
		host = a.Unmap().String()
	case 3:
		n, err := br.ReadByte()
		if err != nil {
			return
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(br, b); err != nil {
			return
		}
		host = string(b)
	default:
		socksReply(c, socksNoAddrType)
		return
	}
	var port [2]byte
	if _, err := io.ReadFull(br, port[:]); err != nil {
		return
	}
	up, _ := p.dial(net.JoinHostPort(host, strconv.Itoa(int(binary.BigEndian.Uint16(port[:])))))
	if up == nil {
		socksReply(c, socksNotAllowed)
		return
	}
	if !p.track(up) {
		up.Close()
		return
	}
	defer p.untrack(up)
	if !socksReply(c, socksOK) {
		return
	}
	_ = c.SetDeadline(time.Time{})
	splice(c, br, up)
}

func socksReply(c net.Conn, code byte) bool {
	_, err := c.Write([]byte{5, code, 0, 1, 0, 0, 0, 0, 0, 0})
	return err == nil
}

// errDenied marks a connection the allowlist refused at the socket.
var errDenied = errors.New("denied")

// dial connects to target (host:port) when the allowlist admits it, or
// returns why not (and tells Denied). Names are resolved here; every
// address is judged before it is dialled, and again by the socket's
// control hook, on the address actually connected to.
func (p *Proxy) dial(target string) (net.Conn, string) {
	deny := func(reason string) (net.Conn, string) {
		reason = "runnel's sandbox refused a connection to " + target + ": " + reason
		if p.opts.Denied != nil {
			p.opts.Denied(reason)
		}
		return nil, reason
	}
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		return deny("not a host and port")
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.opts.DialTimeout)
	defer cancel()
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a.Unmap()}
	} else if !p.allow.admitsName(host) {
		return deny(host + " is not on the allowlist")
	} else if addrs, err = p.opts.Resolver.LookupNetIP(ctx, "ip", host); err != nil {
		return deny("could not resolve " + host)
	}
	denied, connectErr := "", error(nil)
	for _, a := range addrs {
		if denied = p.allow.admits(host, a); denied != "" {
			continue
		}
		d := net.Dialer{Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil || p.allow.admits(host, ap.Addr()) != "" {
				return errDenied
			}
			return nil
		}}
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, ""
		}
		if errors.Is(err, errDenied) {
			denied = a.String() + " is not on the allowlist"
			continue
		}
		connectErr = err
	}
	if connectErr != nil {
		// Admitted but unreachable: not the allowlist's doing.
		return nil, "could not connect to " + target
	}
	if denied == "" {
		denied = "it resolves to no address"
	}
	return deny(denied)
}

// splice copies both ways until both sides are done; what the client
// sent after its handshake is already in br.
func splice(c net.Conn, br *bufio.Reader, up net.Conn) {
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(up, br)
		closeWrite(up)
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(c, up)
		closeWrite(c)
		done <- struct{}{}
	}()
	<-done
	<-done
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}
