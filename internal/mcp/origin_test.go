package mcp

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// endpointServer is an SSE MCP server that only ever sends its endpoint
// event, naming where the client should POST its messages.
func endpointServer(endpoint func(r *http.Request) string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "no", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: endpoint\ndata: %s\n\n", endpoint(r))
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done()
	})
}

// requestLog records the requests a server received.
type requestLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *requestLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.seen = append(l.seen, fmt.Sprintf("%s %s (header present: %t)", r.Method, r.URL.Path, r.Header.Get(testHeader) != ""))
		l.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (l *requestLog) requests() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.seen...)
}

// TestSSEEndpointStaysOnOrigin: the SSE transport's endpoint event names
// where every message is POSTed, with the server's headers. An endpoint on
// another origin (another port, plain http for an https server, another
// name for the same address) is refused before anything is sent there.
func TestSSEEndpointStaysOnOrigin(t *testing.T) {
	var elsewhere requestLog
	other := httptest.NewServer(elsewhere.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
	})))
	defer other.Close()

	var plainLog requestLog
	var plain *httptest.Server
	plain = httptest.NewServer(plainLog.wrap(endpointServer(func(r *http.Request) string {
		if r.URL.Query().Get("to") == "localhost" {
			return strings.Replace(plain.URL, "127.0.0.1", "localhost", 1) + "/messages?sessionid=1"
		}
		return other.URL + "/messages?sessionid=1"
	})))
	defer plain.Close()
	secure := httptest.NewTLSServer(endpointServer(func(*http.Request) string { return other.URL + "/messages?sessionid=2" }))
	defer secure.Close()
	roots := x509.NewCertPool()
	roots.AddCert(secure.Certificate())

	opts := allowLoopback()
	opts.Guard.HostAllowlist = append(opts.Guard.HostAllowlist, "localhost")
	opts.TLSConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	opts.ConnectTimeout = 20 * time.Second // a hang guard: without the check, initialize waits for an answer that never comes

	const rule = "; runnel sends requests, with their headers, only to the scheme, host and port of the server's URL."
	tests := []struct {
		name, url, want string
		log             *requestLog // the server the refused endpoint would have reached
	}{
		{"another origin", plain.URL + "/sse",
			plain.URL + " named " + other.URL + " as its message endpoint, another origin" + rule, &elsewhere},
		{"https to http", secure.URL + "/sse",
			secure.URL + " named " + other.URL + " as its message endpoint, another origin" + rule, &elsewhere},
		{"another name for the same server", plain.URL + "/sse?to=localhost",
			plain.URL + " named " + strings.Replace(plain.URL, "127.0.0.1", "localhost", 1) + " as its message endpoint, another origin" + rule, &plainLog},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := ServerSpec{Name: "s", Transport: TransportSSE, URL: tt.url, ToolMode: ToolsAll,
				Headers: map[string]string{testHeader: "endpoint-secret"}}
			pool := Connect(t.Context(), []ServerSpec{spec}, opts)
			if err := pool.Close(); err != nil {
				t.Fatal(err)
			}
			want := []string{`MCP server "s" is unavailable for this run: ` + tt.want}
			if diff := cmp.Diff(want, pool.Notices()); diff != "" {
				t.Errorf("notices (-want +got):\n%s", diff)
			}
			for _, r := range tt.log.requests() {
				if !strings.HasPrefix(r, "GET ") {
					t.Errorf("the endpoint's origin received %s", r)
				}
			}
		})
	}
}
