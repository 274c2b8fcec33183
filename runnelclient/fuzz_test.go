package runnelclient

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runnel/runnel"
)

// ndjsonBody answers every request with one NDJSON body.
type ndjsonBody []byte

func (b ndjsonBody) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/x-ndjson"}}, Body: io.NopCloser(bytes.NewReader(b)), Request: req}, nil
}

// stream reads body as Stream's answer, with lines of at most 512 bytes.
func stream(ctx context.Context, body []byte) ([]runnel.Event, *runnel.Result, error) {
	c := New("http://runnel.test", WithHTTPClient(&http.Client{Transport: ndjsonBody(body)}), WithMaxRecordBytes(512))
	var got []runnel.Event
	res, err := c.Stream(ctx, &runnel.RunRequest{Messages: []runnel.Message{runnel.UserText("hi")}}, func(e runnel.Event) {
		got = append(got, e)
	})
	return got, res, err
}

// FuzzStream fuzzes the client's reading of an NDJSON run stream:
// whatever the lines, Stream returns a result or an error saying so,
// never both; it hands on at most an event a line; and a stream it reads
// is written back as NDJSON (events in order, then the result; but for
// events of types it does not know) the same after one more reading.
func FuzzStream(f *testing.F) {
	lines := []string{
		`{"kind":"event","event":{"type":"tool_call","id":"call_5ea8","name":"get_weather","input":{"city":"Paris"}}}`,
		`{"kind":"event","event":{"type":"usage","input":10,"output":5,"total":15,"cost":0}}`,
		`{"kind":"event","event":{"type":"tool_result","id":"call_5ea8","output":"18°C and sunny in Paris"}}`,
		`{"kind":"event","event":{"type":"message_start","id":"msg_2"}}`,
		`{"kind":"event","event":{"type":"message_delta","id":"msg_2","delta":"The w"}}`,
		``,
		`{"kind":"event","event":{"type":"done","stopReason":"end_turn"}}`,
		`{"kind":"result","result":{"ok":true,"status":"completed","output":"The weather in Paris: 18°C and sunny in Paris","messages":[{"role":"assistant","content":"hi"}]}}`,
	}
	f.Add([]byte(strings.Join(lines, "\n") + "\n"))
	f.Add([]byte(`{"kind":"result","result":{"ok":false,"error":"no","errorCode":"provider_error"}}` + "\n" + lines[0]))
	f.Add([]byte(`{"kind":"event","event":{"type":"x"},"result":{}}`))
	for _, name := range []string{"run_result.ok.json", "run_result.error.json"} {
		if b, err := os.ReadFile(filepath.Join("..", "..", "shared", "conformance", "agenta-v0.113", name)); err == nil {
			var compact bytes.Buffer
			if json.Compact(&compact, b) == nil {
				f.Add([]byte(`{"kind":"result","result":` + compact.String() + "}\n"))
			}
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		events, res, err := stream(t.Context(), body)
		if (res == nil) == (err == nil) {
			t.Fatalf("Stream = %v, %v; want a result or an error", res, err)
		}
		if n := bytes.Count(body, []byte("\n")) + 1; len(events) > n {
			t.Fatalf("%d events from %d lines", len(events), n)
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), "runnel: ") {
				t.Fatalf("error %q does not say it is runnel's", err)
			}
			return
		}
		// Events of types this package does not know are passed on (a
		// newer server's), and cannot be written again: they are left
		// out of the round trip.
		events = known(t, events)
		res.Events = known(t, res.Events)
		again := ndjson(t, events, res)
		events2, res2, err := stream(t.Context(), again)
		if err != nil {
			// A line over the bound is the only way: an encoding
			// escapes more than the server wrote.
			if !strings.Contains(err.Error(), "longer than") {
				t.Fatalf("the stream written back does not read: %v\n%s", err, again)
			}
			return
		}
		if twice := ndjson(t, events2, res2); !bytes.Equal(again, twice) {
			t.Fatalf("the stream changed on a second round trip:\n%s\n%s", again, twice)
		}
	})
}

// ndjson writes events and the result as runnel's NDJSON stream.
func ndjson(t *testing.T, events []runnel.Event, res *runnel.Result) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, e := range events {
		if err := enc.Encode(record{Kind: "event", Event: &e}); err != nil {
			t.Fatalf("event %+v does not encode: %v", e, err)
		}
	}
	if err := enc.Encode(record{Kind: "result", Result: res}); err != nil {
		t.Fatalf("the result does not encode: %v", err)
	}
	return b.Bytes()
}

// known are the events of evs whose type this package knows; an event
// that does not encode for another reason fails the test.
func known(t *testing.T, evs []runnel.Event) []runnel.Event {
	t.Helper()
	var out []runnel.Event
	for _, e := range evs {
		_, err := json.Marshal(e)
		switch {
		case err == nil:
			out = append(out, e)
		case !strings.Contains(err.Error(), "unknown event type"):
			t.Fatalf("event %+v, read from the stream, does not encode: %v", e, err)
		}
	}
	return out
}
