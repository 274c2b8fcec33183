package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// created is the timestamp every reply carries. A fixed value keeps replies a
// pure function of the request, so the same request twice gets byte-identical
// answers.
const created = 1735689600 // 2025-01-01T00:00:00Z

// The usage reported when a reply sets none.
const (
	defaultInputTokens  = 10
	defaultOutputTokens = 5
)

// outcome is a rule's reply resolved against one request: placeholders
// filled, ids generated, pieces cut. The API encoders turn it into bytes.
type outcome struct {
	base         string // hex digest of the request body: the stem of generated ids
	model        string
	text         string
	reasoning    string
	calls        []ToolCall // IDs set, Arguments compacted
	usage        Usage
	chunk        int
	delay        time.Duration
	includeUsage bool // chat: stream_options.include_usage
}

// resolve fills the reply of a rule for this request. callPrefix is the
// API's tool-call id prefix ("call_", "toolu_").
func resolve(r Reply, c *Conversation, body []byte, callPrefix string) outcome {
	o := outcome{
		base:  digest(body),
		model: c.Model,
		usage: Usage{Input: defaultInputTokens, Output: defaultOutputTokens},
		chunk: r.ChunkSize,
		delay: time.Duration(r.TokenDelayMs) * time.Millisecond,
	}
	if o.model == "" {
		o.model = "mockllm"
	}
	if r.Usage != nil {
		o.usage = *r.Usage
	}
	last, _ := c.LastToolResult()
	fill := strings.NewReplacer("{{last_user}}", c.LastUser(), "{{last_tool_result}}", last.Text)
	o.text = fill.Replace(r.Text)
	o.reasoning = fill.Replace(r.Reasoning)
	for i, tc := range r.ToolCalls {
		if ns, name, ok := c.ResolveTool(tc.Name); ok && name != tc.Name {
			tc.Namespace, tc.Name = ns, name
		}
		if tc.ID == "" {
			tc.ID = fmt.Sprintf("%s%s%02d", callPrefix, o.base, i)
		}
		tc.Arguments = compactJSON(bytes.TrimSpace(tc.Arguments))
		if len(tc.Arguments) == 0 {
			tc.Arguments = json.RawMessage("{}")
		}
		o.calls = append(o.calls, tc)
	}
	return o
}

func (o outcome) id(prefix string) string { return prefix + o.base }

// pieces cuts s into pieces of at most o.chunk bytes (three pieces when
// unset), never inside a UTF-8 sequence, so every piece is valid text.
func (o outcome) pieces(s string) []string {
	if s == "" {
		return nil
	}
	size := o.chunk
	if size <= 0 {
		size = max(1, (len(s)+2)/3)
	}
	var out []string
	for len(s) > 0 {
		end := min(size, len(s))
		for end < len(s) && !utf8.RuneStart(s[end]) {
			end++
		}
		out = append(out, s[:end])
		s = s[end:]
	}
	return out
}

// sseEvent is one server-sent event: an optional "event:" name and its data.
type sseEvent struct {
	name string
	data []byte
}

// kv and obj build JSON objects whose keys keep the order the real APIs use
// ("type" first), which makes streams readable with curl.
type kv struct {
	k string
	v any
}

type obj []kv

// MarshalJSON writes the pairs in order.
func (o obj) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, p := range o {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, err := json.Marshal(p.k)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(p.v)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", p.k, err)
		}
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// mustJSON marshals values built in this package. They hold only strings,
// numbers, nested objs and RawMessages validated by the caller, so an error
// is a bug here.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("llmtest: marshal reply: %v", err))
	}
	return b
}

// objectArguments returns arguments usable where the wire needs a JSON object
// (an Anthropic tool_use input): the arguments when they are one, else {}.
func objectArguments(args json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil || m == nil {
		return json.RawMessage("{}")
	}
	return args
}
