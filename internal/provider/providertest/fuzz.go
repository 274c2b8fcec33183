package providertest

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/llmtest"
	"github.com/runnel/runnel/internal/provider"
)

// FuzzStream fuzzes a's reading of its API's event stream: every input is
// the body of a 200 text/event-stream answer, seeded with what the
// scripted model server (internal/llmtest) sends for api. Whatever the
// body, Stream returns a response or a *provider.Error, never both, and
// never one that carries the API key or is retryable after chunks went
// out; chunk indexes name calls started before; the chunks and their
// bytes are bounded by the body's size; and a response holds exactly what
// was streamed (its text, its reasoning, its calls) with JSON arguments.
func (a Adapter) FuzzStream(f *testing.F, api string) {
	for _, body := range a.realBodies(f, api) {
		f.Add(body)
	}
	f.Add([]byte(": ping\n\nevent: ping\ndata: {}\n\n"))
	f.Add([]byte(`data: {"error":{"message":"bad key ` + Key + `"}}` + "\n\n"))
	f.Add([]byte(`event: error` + "\n" + `data: {"type":"error","code":"server_error","message":"` + Key + `","error":{"type":"api_error","message":"` + Key + `"}}` + "\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		cfg := provider.Config{BaseURL: "http://model.test" + a.BasePath, APIKey: Key,
			HTTPClient: &http.Client{Transport: CannedTransport(body)}}
		chunks, resp, err := Stream(t, a.New(cfg), a.Hello("hi"))
		checkStream(t, len(body), chunks, resp, err)
	})
}

// checkStream checks what Stream made of a body of n bytes.
func checkStream(t *testing.T, n int, chunks []provider.Chunk, resp *provider.Response, err error) {
	t.Helper()
	if (resp == nil) == (err == nil) {
		t.Fatalf("Stream returned the response %v and the error %v; want exactly one", resp, err)
	}
	// Every chunk needs a few bytes of the body, and a byte of the body
	// decodes to at most 3 (an invalid byte becomes U+FFFD); a call id
	// made up for a call that came without one is the exception.
	if len(chunks) > 2*n+2 {
		t.Fatalf("%d chunks from %d bytes", len(chunks), n)
	}
	var text, reasoning strings.Builder
	started := map[int]bool{}
	size := 0
	for _, c := range chunks {
		size += len(c.Text) + len(c.ToolName)
		switch c.Kind {
		case provider.ChunkText:
			text.WriteString(c.Text)
		case provider.ChunkReasoning:
			reasoning.WriteString(c.Text)
		case provider.ChunkToolCall:
			if started[c.Index] || c.Index < 0 {
				t.Fatalf("tool call %d started twice, or with a negative index", c.Index)
			}
			started[c.Index] = true
			if len(c.ToolCallID) > 3*n+64 {
				t.Fatalf("a call id of %d bytes from %d bytes", len(c.ToolCallID), n)
			}
		case provider.ChunkToolArgs:
			if !started[c.Index] {
				t.Fatalf("arguments for tool call %d, which was not started", c.Index)
			}
		default:
			t.Fatalf("a chunk of kind %d", c.Kind)
		}
	}
	if size > 3*n {
		t.Fatalf("%d bytes of chunks from %d bytes", size, n)
	}
	if err != nil {
		var pe *provider.Error
		switch {
		case !errors.As(err, &pe):
			t.Fatalf("error %T is not a *provider.Error: %v", err, err)
		case strings.Contains(pe.Message, Key):
			t.Fatalf("the error carries the API key: %s", pe.Message)
		case pe.Retryable && len(chunks) > 0:
			t.Fatalf("the error is retryable after %d chunks: %s", len(chunks), pe.Message)
		}
		return
	}
	var gotText, gotReasoning strings.Builder
	calls := 0
	for _, b := range resp.Content {
		switch b.Type {
		case runnel.BlockText:
			gotText.WriteString(b.Text)
		case runnel.BlockReasoning:
			gotReasoning.WriteString(b.Text)
		case runnel.BlockToolCall:
			calls++
			if !json.Valid(b.Input) {
				t.Fatalf("tool call %q has arguments that are not JSON: %q", b.ToolCallID, b.Input)
			}
		default:
			t.Fatalf("a block of type %q in the response", b.Type)
		}
	}
	if len(resp.Content) > n {
		t.Fatalf("%d blocks from %d bytes", len(resp.Content), n)
	}
	if resp.StopReason == "" {
		t.Fatal("a response without a stop reason")
	}
	if gotText.String() != text.String() {
		t.Fatalf("the response's text %q is not the text streamed, %q", gotText.String(), text.String())
	}
	if gotReasoning.String() != reasoning.String() {
		t.Fatalf("the response's reasoning %q is not the reasoning streamed, %q", gotReasoning.String(), reasoning.String())
	}
	if calls != len(started) {
		t.Fatalf("the response has %d tool calls, the stream started %d", calls, len(started))
	}
}

// realBodies are the event streams the scripted model server sends for
// api in answer to a's requests: text, reasoning, tool calls, in small
// pieces and whole.
func (a Adapter) realBodies(f *testing.F, api string) [][]byte {
	f.Helper()
	replies := []llmtest.Reply{
		{Text: "Hello, world!", ChunkSize: 5, Usage: &llmtest.Usage{Input: 12, Output: 7}},
		{Reasoning: "Let me think.", Text: "Voilà: 42 ✓", ChunkSize: 4},
		{Text: "Calling.", ToolCalls: []llmtest.ToolCall{
			{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)},
			{Name: "lookup", Arguments: json.RawMessage(`{"q":"a \"quoted\" word","n":[1,2]}`)},
		}, ChunkSize: 3},
		{ToolCalls: []llmtest.ToolCall{{Name: "broken", Arguments: json.RawMessage(`{"not json`)}}},
	}
	var out [][]byte
	for _, reply := range replies {
		h := llmtest.NewHandler(llmtest.Script{Rules: []llmtest.Rule{{When: llmtest.Match{API: api}, Reply: reply}}})
		rec := &recorder{h: h}
		cfg := provider.Config{BaseURL: "http://model.test" + a.BasePath, APIKey: Key, HTTPClient: &http.Client{Transport: rec}}
		req := a.Hello("hi")
		req.Tools = []provider.Tool{{Name: "get_weather", Schema: json.RawMessage(`{"type":"object"}`)}}
		if _, err := a.New(cfg).Stream(f.Context(), req, func(provider.Chunk) {}); err != nil {
			f.Fatalf("the scripted server's answer %+v: %v", reply, err)
		}
		h.Close()
		out = append(out, rec.body)
	}
	return out
}

// recorder serves requests with h in memory and keeps the last body it
// answered with.
type recorder struct {
	h    http.Handler
	body []byte
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	w := httptest.NewRecorder()
	r.h.ServeHTTP(w, req)
	res := w.Result()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	r.body = body
	res.Body = io.NopCloser(strings.NewReader(string(body)))
	return res, nil
}

// ChunkDecodeAgrees fails t unless provider.DecodeChunk reads data into a
// T exactly as encoding/json does: the same value, an error for the same
// inputs, and a type mismatch for the same errors.
func ChunkDecodeAgrees[T any](t *testing.T, data []byte) {
	t.Helper()
	var want, got T
	wantErr, gotErr := json.Unmarshal(data, &want), provider.DecodeChunk(data, &got)
	if (wantErr == nil) != (gotErr == nil) {
		t.Fatalf("%q into %T: encoding/json says %v, DecodeChunk %v", data, want, wantErr, gotErr)
	}
	if wantErr != nil {
		var te *json.UnmarshalTypeError
		if errors.As(wantErr, &te) != provider.IsTypeMismatch(gotErr) {
			t.Fatalf("%q into %T: encoding/json's error %v and DecodeChunk's %v disagree on being a type mismatch", data, want, wantErr, gotErr)
		}
		return
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("%q into %T (-encoding/json +DecodeChunk):\n%s", data, want, diff)
	}
}
