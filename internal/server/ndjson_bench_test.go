package server

import (
	"bufio"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/llmtest"
	"github.com/runnel/runnel/internal/run"
)

// BenchmarkNDJSONEvents is the server's cost per streamed event: a run
// that emits 1,000 text deltas (what a model's chunks become), written as
// NDJSON records over a real loopback connection and read by a client.
// ns/event covers encoding, the write and the flush of each record.
func BenchmarkNDJSONEvents(b *testing.B) {
	const events = 1000
	runner := runnerFunc(func(_ context.Context, _ *runnel.RunRequest, sink runnel.Sink) (*runnel.Result, error) {
		sink.Emit(runnel.Event{Type: runnel.EventMessageStart, ID: "m1"})
		for range events {
			sink.Emit(runnel.Event{Type: runnel.EventMessageDelta, ID: "m1", Delta: "lorem "})
		}
		sink.Emit(runnel.Event{Type: runnel.EventMessageEnd, ID: "m1"})
		return &runnel.Result{OK: true, Status: runnel.StatusCompleted, Output: "done", StopReason: runnel.StopEndTurn}, nil
	})
	ts := newTestServer(b, runner, nil)
	client := ts.Client()
	b.ReportAllocs()
	for b.Loop() {
		lines := 0
		streamRun(b, client, ts.URL, hiRequest, func(string) { lines++ })
		if lines != events+3 {
			b.Fatalf("%d lines, want %d", lines, events+3)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
}

// BenchmarkStreamedChunks is the whole path of a streamed chunk through
// runnel: the fake model (internal/llmtest, its own server over loopback)
// streams a 2,000-piece answer as OpenAI Chat Completions chunks, runnel's
// run reads each into an event, and the server writes it as an NDJSON
// record to a client over loopback. ns/chunk is the wall time per piece
// with both servers in this process.
func BenchmarkStreamedChunks(b *testing.B) {
	const pieces = 2000
	// A handler that records nothing: a recording one would grow with b.N.
	model := llmtest.NewServeHandler(llmtest.Script{Rules: []llmtest.Rule{
		{Reply: llmtest.Reply{Text: strings.Repeat("lorem ", pieces), ChunkSize: 6}},
	}}, slog.New(slog.DiscardHandler))
	llm := httptest.NewServer(model)
	b.Cleanup(func() { llm.Close(); model.Close() })
	models := &http.Transport{}
	b.Cleanup(models.CloseIdleConnections)
	ts := newTestServer(b, run.NewManager(&run.Options{HTTPClient: &http.Client{Transport: models}}), nil)
	body := `{"model":"openai/m","endpoint":{"baseUrl":"` + llm.URL + `/v1"},"secrets":{"OPENAI_API_KEY":"sk-bench"},"tools":[],` +
		`"messages":[{"role":"user","content":"hi"}]}`
	client := ts.Client()
	b.ReportAllocs()
	for b.Loop() {
		deltas := 0
		streamRun(b, client, ts.URL, body, func(line string) {
			if strings.Contains(line, `"message_delta"`) {
				deltas++
			}
		})
		if deltas != pieces {
			b.Fatalf("%d message deltas, want %d", deltas, pieces)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*pieces), "ns/chunk")
}

// streamRun posts body to url's /run as a streaming request and hands each
// NDJSON line to line.
func streamRun(b *testing.B, client *http.Client, url, body string, line func(string)) {
	b.Helper()
	req, err := http.NewRequestWithContext(b.Context(), http.MethodPost, url+"/run", strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line(sc.Text())
	}
}
