package llmtest

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// start runs a server for the script and closes it when the test ends.
func start(t *testing.T, rules ...Rule) *Server {
	t.Helper()
	srv := NewServer(Script{Rules: rules})
	t.Cleanup(srv.Close)
	return srv
}

// Each client gets its own transport, closed with the test, so no idle
// connection outlives it.
func testHTTPClient(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func openaiClient(t *testing.T, srv *Server, opts ...option.RequestOption) openai.Client {
	t.Helper()
	base := []option.RequestOption{
		option.WithBaseURL(srv.URL + "/v1"),
		option.WithAPIKey("sk-test"),
		option.WithMaxRetries(0),
		option.WithHTTPClient(testHTTPClient(t)),
	}
	return openai.NewClient(append(base, opts...)...)
}

func anthropicClient(t *testing.T, srv *Server, opts ...aoption.RequestOption) anthropic.Client {
	t.Helper()
	base := []aoption.RequestOption{
		aoption.WithBaseURL(srv.URL),
		aoption.WithAPIKey("sk-ant-test"),
		aoption.WithMaxRetries(0),
		aoption.WithHTTPClient(testHTTPClient(t)),
	}
	return anthropic.NewClient(append(base, opts...)...)
}

// post sends a raw JSON body and returns the status and the whole response body.
func post(t *testing.T, srv *Server, path, body string) (int, []byte) {
	t.Helper()
	resp, err := testHTTPClient(t).Post(srv.URL+path, "application/json", bytes.NewBufferString(body))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return resp.StatusCode, data
}

func intp(n int) *int { return &n }
