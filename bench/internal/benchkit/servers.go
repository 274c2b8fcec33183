package benchkit

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Servers are HTTP servers a driver starts on fresh ports of 127.0.0.1 (its
// fakes) and closes together. The zero value is ready to use.
type Servers struct {
	servers []*http.Server
	served  sync.WaitGroup
}

// Serve serves h on a fresh loopback port and returns its base URL.
func (s *Servers) Serve(h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("listen for a fake: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
	s.servers = append(s.servers, srv)
	s.served.Go(func() { _ = srv.Serve(ln) }) // http.ErrServerClosed after Close
	return "http://" + ln.Addr().String(), nil
}

// Close closes every server and its connections and returns when each
// has stopped serving.
func (s *Servers) Close() {
	for _, srv := range s.servers {
		_ = srv.Close()
	}
	s.served.Wait()
}
