package provider

import (
	"bytes"
	"encoding/json"

	"github.com/runnel/runnel"
)

// EncodedMessages keeps a conversation's encoding across the steps of a
// run. The API is stateless, so every step sends the whole conversation,
// but the messages the harness already sent are the same messages: the
// loop only appends to its history and never changes a message it
// appended (internal/harness/native). Encoding them again cost most of a
// long run's step time (docs/benchmarks.md); now each is encoded once,
// and a step costs the new messages and a pointer comparison per old one.
//
// A message is known by the identity of its content (the address of its
// first block and the number of blocks) and its role. A history that
// diverges from the one encoded (rebuilt, or changed) is encoded afresh
// from the first difference on: the cache can miss, never serve another
// message's bytes. It is not safe for concurrent use: an adapter holds its
// own lock while it encodes a request.
type EncodedMessages struct {
	// keys[i] are the messages of unit i (a message, or the messages an
	// API merges into one); ends[i] is the length of joined after it.
	keys   [][]MessageKey
	ends   []int
	joined []byte
}

// MessageKey is a message's identity (see EncodedMessages).
type MessageKey struct {
	first *runnel.Block
	n     int
	role  runnel.Role
}

// KeyOf is m's identity.
func KeyOf(m runnel.Message) MessageKey {
	k := MessageKey{n: len(m.Content), role: m.Role}
	if len(m.Content) > 0 {
		k.first = &m.Content[0]
	}
	return k
}

func (c *EncodedMessages) same(i int, unit []runnel.Message) bool {
	if len(c.keys[i]) != len(unit) {
		return false
	}
	for j, m := range unit {
		if c.keys[i][j] != KeyOf(m) {
			return false
		}
	}
	return true
}

// Join returns the encodings of msgs, comma-separated (a message that
// encodes to nothing adds nothing). encode is called only for messages
// not encoded before. The bytes returned never change afterwards: a later
// call only appends past them, or starts a new buffer.
func (c *EncodedMessages) Join(msgs []runnel.Message, encode func(runnel.Message) ([]byte, error)) ([]byte, error) {
	return c.join(len(msgs), func(i int) []runnel.Message { return msgs[i : i+1 : i+1] },
		func(_ int, u []runnel.Message) ([]byte, error) { return encode(u[0]) })
}

// JoinUnits is Join for an API that merges some messages into one (the
// Anthropic API merges consecutive messages of a role): unit(i) are the
// messages of unit i, encode(i) its encoding. A unit is encoded as a
// whole, and one that gained a message is encoded again.
func (c *EncodedMessages) JoinUnits(n int, unit func(i int) []runnel.Message, encode func(i int) ([]byte, error)) ([]byte, error) {
	return c.join(n, unit, func(i int, _ []runnel.Message) ([]byte, error) { return encode(i) })
}

func (c *EncodedMessages) join(n int, unit func(int) []runnel.Message, encode func(int, []runnel.Message) ([]byte, error)) ([]byte, error) {
	k := 0
	for k < len(c.keys) && k < n && c.same(k, unit(k)) {
		k++
	}
	if k < len(c.keys) {
		// Diverged at k: keep what came before, in a buffer of its own
		// (a request sent earlier may still be reading the old one).
		end := 0
		if k > 0 {
			end = c.ends[k-1]
		}
		c.joined = append([]byte(nil), c.joined[:end]...)
		c.keys, c.ends = c.keys[:k], c.ends[:k]
	}
	for i := k; i < n; i++ {
		u := unit(i)
		frag, err := encode(i, u)
		if err != nil {
			return nil, err
		}
		if len(frag) > 0 {
			if len(c.joined) > 0 {
				c.joined = append(c.joined, ',')
			}
			c.joined = append(c.joined, frag...)
		}
		keys := make([]MessageKey, len(u))
		for j, m := range u {
			keys[j] = KeyOf(m)
		}
		c.keys = append(c.keys, keys)
		c.ends = append(c.ends, len(c.joined))
	}
	return c.joined[:len(c.joined):len(c.joined)], nil
}

// AppendJSON appends v's JSON to dst as encoding/json's Encoder writes it
// with HTML escaping off, without the trailing newline.
func AppendJSON(dst []byte, v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return dst, err
	}
	return append(dst, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...), nil
}
