package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/runnelclient"
)

// A newer server's result may hold events of a type this build does not
// know: `runnel run --remote` still writes the result, without them, as
// it skips them in a stream (found by runnelclient's FuzzStream).
func TestRunRemoteSkipsUnknownEventsInTheResult(t *testing.T) {
	const result = `{"ok":true,"status":"completed","output":"hi","events":[{"type":"message","text":"hi"},{"type":"hologram","text":"new"}]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") == "application/x-ndjson" {
			w.Header().Set("Content-Type", "application/x-ndjson")
			fmt.Fprintf(w, "{\"kind\":\"event\",\"event\":{\"type\":\"hologram\"}}\n{\"kind\":\"result\",\"result\":%s}\n", result)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, result)
	}))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := runnelclient.New(srv.URL, runnelclient.WithHTTPClient(&http.Client{Transport: tr}))
	for _, stream := range []bool{false, true} {
		req := `{"model":"openai/gpt-test","messages":[{"role":"user","content":"hi"}]}`
		res := runRemote(t.Context(), slog.New(slog.DiscardHandler), c, srv.URL, strings.NewReader(req), 0, stream, runnel.Discard{})
		out, err := json.Marshal(res)
		if err != nil || !res.OK || len(res.Events) != 1 {
			t.Errorf("stream %v: result %s, %v; want it written with its one known event", stream, out, err)
		}
	}
}
