package provider_test

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/llmtest"
	"github.com/runnel/runnel/internal/provider"
	"github.com/runnel/runnel/internal/provider/openai"
)

// TestRunsShareOneHTTP2Connection: against a provider that speaks HTTP/2
// over TLS, as the hosted APIs do, concurrent model calls are streams of
// one connection, not a connection each.
func TestRunsShareOneHTTP2Connection(t *testing.T) {
	h := llmtest.NewHandler(llmtest.Script{Rules: []llmtest.Rule{{Reply: llmtest.Reply{Text: "hello there", ChunkSize: 3}}}})
	var conns, h1 atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			h1.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	srv.EnableHTTP2 = true
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(func() { srv.Close(); h.Close() })

	tr := provider.NewTransport()
	t.Cleanup(tr.CloseIdleConnections)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	if tr.TLSClientConfig == nil {
		tr.TLSClientConfig = &tls.Config{}
	}
	tr.TLSClientConfig.RootCAs = roots
	m := openai.NewChat(provider.Config{BaseURL: srv.URL + "/v1", APIKey: "sk-test", HTTPClient: &http.Client{Transport: tr}})
	call := func() error {
		resp, err := m.Stream(t.Context(), &provider.Request{Model: "m", Messages: []runnel.Message{runnel.UserText("hi")}}, func(provider.Chunk) {})
		if err == nil && (runnel.Message{Content: resp.Content}).Text() != "hello there" {
			t.Errorf("answer %+v", resp.Content)
		}
		return err
	}
	// The first call dials; the ones after it, 50 at once, must not.
	if err := call(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if err := call(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := h1.Load(); n != 0 {
		t.Errorf("%d calls came over HTTP/1.1, want all over HTTP/2", n)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("51 calls opened %d connections, want 1", n)
	}
}
