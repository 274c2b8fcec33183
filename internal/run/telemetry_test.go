package run

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/llmtest"
	rmcp "github.com/runnel/runnel/internal/mcp"
	"github.com/runnel/runnel/internal/telemetry"
)

// span is one span an OTLP receiver got, flattened.
type span struct {
	name, traceID, spanID, parentID, status string
	attrs                                   map[string]string
}

// otlpReceiver is a real OTLP/HTTP traces endpoint: it decodes each
// export's protobuf body and keeps the spans and the headers they came
// with.
type otlpReceiver struct {
	url     string
	mu      sync.Mutex
	spans   []span
	headers []http.Header
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		var export collectortrace.ExportTraceServiceRequest
		if err != nil || req.URL.Path != "/v1/traces" || proto.Unmarshal(body, &export) != nil {
			http.Error(w, "not an OTLP/HTTP traces export", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.headers = append(r.headers, req.Header.Clone())
		for _, rs := range export.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					f := span{name: s.Name, traceID: hex.EncodeToString(s.TraceId), spanID: hex.EncodeToString(s.SpanId),
						parentID: hex.EncodeToString(s.ParentSpanId), status: s.GetStatus().GetMessage(), attrs: map[string]string{}}
					for _, kv := range s.Attributes {
						f.attrs[kv.Key] = anyValue(kv.Value)
					}
					r.spans = append(r.spans, f)
				}
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Write(out)
	}))
	t.Cleanup(hs.Close)
	r.url = hs.URL
	return r
}

func anyValue(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_ArrayValue:
		var parts []string
		for _, e := range x.ArrayValue.Values {
			parts = append(parts, anyValue(e))
		}
		return strings.Join(parts, ",")
	}
	return v.String()
}

func (r *otlpReceiver) got() ([]span, []http.Header) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans), slices.Clone(r.headers)
}

// TestTracesJoinTheCallersTrace runs a turn that calls a callback tool
// and an MCP tool and then pauses for an approval, with the caller's
// traceparent and baggage, a per-run OTLP target (its headers and
// exportAuthorization a credential) and content capture on, on a runnel
// that also exports to an operator's collector. Both collectors get the
// span tree under the caller's span with the GenAI attributes; the
// callback and the MCP server get the trace under their tool's span; and
// no secret is in any attribute, even captured content that held one.
func TestTracesJoinTheCallersTrace(t *testing.T) {
	const (
		callerTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
		callerSpan   = "00f067aa0ba902b7"
		callbackAuth = "Bearer callback-secret-0008"
		otlpHeader   = "otlp-header-secret-0009"
		exportAuth   = "Bearer export-auth-secret-0010"
	)
	perRun, operator := newOTLPReceiver(t), newOTLPReceiver(t)
	f := newMCPFixture(t)
	var cbMu sync.Mutex
	var cbHeaders []http.Header
	cb := newPlatform(t, func(w http.ResponseWriter, r *http.Request, env envelopeIn) {
		cbMu.Lock()
		cbHeaders = append(cbHeaders, r.Header.Clone())
		cbMu.Unlock()
		// A tool that echoes a credential: captured content must not.
		writeContent(w, "STATUS_CODE_OK", "", "sunny; token "+openAIKey)
	})
	llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{
		{When: llmtest.Match{LastRole: llmtest.RoleTool}, Reply: llmtest.Reply{ToolCalls: []llmtest.ToolCall{
			toolCall("call_del", "delete_file", `{"item":"q3.docx"}`)}}},
		{When: llmtest.Match{LastRole: llmtest.RoleUser}, Reply: llmtest.Reply{ToolCalls: []llmtest.ToolCall{
			toolCall("call_look", "lookup", `{"city":"Paris"}`), toolCall("call_add", "mcp__mem__add", `{"a":2,"b":3}`)}}},
	}})
	defer llm.Close()

	tel, err := telemetry.New(telemetry.Options{Endpoint: operator.url, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	m := NewManager(&Options{Telemetry: tel, MCPGuard: rmcp.GuardOptions{HostAllowlist: []string{"127.0.0.1"}}})
	req := mcpRequest(llm, f, "look up Paris and add 2 and 3")
	req.CustomTools = []runnel.ToolSpec{callbackTool("lookup"), writeTool("delete_file")}
	req.ToolCallback = &runnel.ToolCallback{Endpoint: cb.srv.URL, Authorization: callbackAuth}
	req.Context = &runnel.TraceContext{Propagation: &struct {
		Traceparent string `json:"traceparent,omitempty"`
		Baggage     string `json:"baggage,omitempty"`
	}{Traceparent: "00-" + callerTrace + "-" + callerSpan + "-01", Baggage: "tenant=acme"}}
	req.Telemetry = json.RawMessage(`{"exporters":{"otlp":{"endpoint":"` + perRun.url + `/v1/traces","headers":{"X-Otlp-Key":"` +
		otlpHeader + `"}}},"exportAuthorization":"` + exportAuth + `","capture":{"content":{"enabled":true}}}`)
	rec := &recorder{}
	res, err := m.Run(context.Background(), req, rec)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != runnel.StatusPaused || res.TraceID != callerTrace {
		t.Fatalf("result %s, trace %q; want paused in the caller's trace", res.Status, res.TraceID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tel.Close(ctx); err != nil {
		t.Fatal(err)
	}

	spans, headers := perRun.got()
	if len(headers) == 0 {
		t.Fatal("the run's collector got no export")
	}
	if h := headers[0]; h.Get("Authorization") != exportAuth || h.Get("X-Otlp-Key") != otlpHeader {
		t.Errorf("the run's export came with Authorization %q, X-Otlp-Key %q", h.Get("Authorization"), h.Get("X-Otlp-Key"))
	}
	byName := map[string][]span{}
	for _, s := range spans {
		byName[s.name] = append(byName[s.name], s)
		if s.traceID != callerTrace {
			t.Errorf("span %q is in trace %s, not the caller's", s.name, s.traceID)
		}
	}
	one := func(name string) span {
		t.Helper()
		if len(byName[name]) != 1 {
			t.Fatalf("%d spans named %q; spans: %v", len(byName[name]), name, names(spans))
		}
		return byName[name][0]
	}
	root := one("invoke_agent native")
	if root.parentID != callerSpan {
		t.Errorf("the run's span has parent %s, want the caller's span %s", root.parentID, callerSpan)
	}
	wantAttrs := func(s span, want map[string]string) {
		t.Helper()
		for k, v := range want {
			if got, ok := s.attrs[k]; !ok || (v != "*" && got != v) {
				t.Errorf("span %q: %s = %q (set %v), want %q", s.name, k, got, ok, v)
			}
		}
	}
	wantAttrs(root, map[string]string{"gen_ai.operation.name": "invoke_agent", "gen_ai.request.model": "openai/gpt-test",
		"gen_ai.provider.name": "openai", "gen_ai.conversation.id": "sess-1", "runnel.status": "paused",
		"gen_ai.usage.input_tokens": "*", "gen_ai.usage.output_tokens": "*"})
	chats := byName["chat gpt-test"]
	if len(chats) != 2 {
		t.Fatalf("%d model call spans, want 2; spans: %v", len(chats), names(spans))
	}
	for _, c := range chats {
		if c.parentID != root.spanID {
			t.Errorf("model call span's parent is %s, not the run's", c.parentID)
		}
		wantAttrs(c, map[string]string{"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-test",
			"gen_ai.provider.name": "openai", "gen_ai.usage.input_tokens": "*", "gen_ai.response.finish_reasons": "*"})
	}
	look, add := one("execute_tool lookup"), one("execute_tool mcp__mem__add")
	wantAttrs(look, map[string]string{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
		"gen_ai.tool.call.id": "call_look", "runnel.tool.kind": "callback", "gen_ai.tool.call.arguments": `{"city":"Paris"}`})
	wantAttrs(add, map[string]string{"gen_ai.tool.name": "mcp__mem__add", "gen_ai.tool.call.id": "call_add", "runnel.tool.kind": "mcp"})
	pause := one("pause user_approval")
	wantAttrs(pause, map[string]string{"gen_ai.tool.name": "delete_file", "gen_ai.tool.call.id": "call_del",
		"runnel.interaction.id": "int_call_del"})
	for _, s := range []span{look, add, pause} {
		if s.parentID != root.spanID {
			t.Errorf("span %q's parent is %s, not the run's", s.name, s.parentID)
		}
	}
	if !strings.Contains(look.attrs["gen_ai.tool.call.result"], "sunny") {
		t.Errorf("captured tool result %q", look.attrs["gen_ai.tool.call.result"])
	}

	// The trace continues at the platform and at the MCP server, under
	// the call's own span.
	cbMu.Lock()
	if len(cbHeaders) != 1 || cbHeaders[0].Get("Traceparent") != "00-"+callerTrace+"-"+look.spanID+"-01" ||
		cbHeaders[0].Get("Baggage") != "tenant=acme" {
		t.Errorf("callback headers %v, want the lookup span's traceparent and the caller's baggage", cbHeaders)
	}
	cbMu.Unlock()
	f.mu.Lock()
	tps := slices.Clone(f.traceparents)
	f.mu.Unlock()
	if !slices.Contains(tps, "00-"+callerTrace+"-"+add.spanID+"-01") {
		t.Errorf("MCP traceparents %v, want one under the add span %s", tps, add.spanID)
	}
	for _, tp := range tps {
		if !strings.HasPrefix(tp, "00-"+callerTrace+"-") {
			t.Errorf("an MCP request carried traceparent %q, outside the run's trace", tp)
		}
	}

	// No secret anywhere in what a collector got.
	secrets := []string{openAIKey, anthropicKey, callbackAuth, "callback-secret-0008", mcpHeaderValue, otlpHeader, exportAuth, "export-auth-secret-0010"}
	for _, s := range spans {
		for k, v := range s.attrs {
			for _, sec := range secrets {
				if strings.Contains(v, sec) {
					t.Errorf("span %q attribute %s holds a secret: %q", s.name, k, v)
				}
			}
		}
		for _, sec := range secrets {
			if strings.Contains(s.status, sec) {
				t.Errorf("span %q status holds a secret", s.name)
			}
		}
	}

	// The operator's collector got the same spans.
	opSpans, _ := operator.got()
	if got, want := names(opSpans), names(spans); !slices.Equal(got, want) {
		t.Errorf("operator's collector got %v, the run's %v", got, want)
	}
}

// names are the spans' names, sorted.
func names(spans []span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.name)
	}
	slices.Sort(out)
	return out
}

// TestTelemetryIsReadStrictly: a telemetry runnel cannot act on is
// refused with a sentence, never ignored.
func TestTelemetryIsReadStrictly(t *testing.T) {
	llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{{Reply: llmtest.Reply{Text: "hi"}}}})
	defer llm.Close()
	for _, tel := range []string{
		`{"exporters":{"otlp":{"endpoint":"ftp://collector/v1/traces"}}}`,
		`{"exporters":{"otlp":{"endpoint":"http://user:pw@collector/v1/traces"}}}`,
		`{"exporters":{"otlp":{"endpoint":42}}}`,
		`{"capture":{"content":{"enabled":"yes"}}}`,
	} {
		req := baseRequest(llm, APIOpenAIChat, "hi")
		req.Telemetry = json.RawMessage(tel)
		_, err := NewManager(nil).Run(context.Background(), req, nil)
		if runnel.ErrorCodeOf(err) != runnel.CodeInvalidRequest || !strings.Contains(err.Error(), "telemetry") {
			t.Errorf("%s: %v, want invalid_request naming telemetry", tel, err)
		}
	}
}

// TestASlowCollectorNeverHoldsARun: the run's collector takes the export
// and does not answer; the run has already returned (its result is in
// hand while the export is still blocked), and Close, bounded by its
// context, gives up on it without leaking the worker.
func TestASlowCollectorNeverHoldsARun(t *testing.T) {
	got, release := make(chan struct{}, 1), make(chan struct{})
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer collector.Close()
	defer close(release)
	llm := llmtest.NewServer(llmtest.Script{Rules: []llmtest.Rule{{Reply: llmtest.Reply{Text: "hi"}}}})
	defer llm.Close()
	tel, err := telemetry.New(telemetry.Options{ExportTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	req := baseRequest(llm, APIOpenAIChat, "hi")
	req.Telemetry = json.RawMessage(`{"exporters":{"otlp":{"endpoint":"` + collector.URL + `"}}}`)
	res, err := NewManager(&Options{Telemetry: tel}).Run(context.Background(), req, nil)
	if err != nil || res.Status != runnel.StatusCompleted {
		t.Fatalf("%+v %v", res, err)
	}
	<-got // the export reached the collector after the run returned, and hangs there
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := tel.Close(ctx); err == nil {
		t.Error("Close returned without error while an export still hung")
	}
}
