package openai

import (
	"testing"

	"github.com/runnel/runnel/internal/provider/providertest"
)

// FuzzChunkDecodeAgrees: provider.DecodeChunk reads every Chat Completions
// chunk and Responses event exactly as encoding/json did, which the
// adapters were written and fuzzed against.
func FuzzChunkDecodeAgrees(f *testing.F) {
	for _, s := range []string{
		`{"choices":[{"index":0,"delta":{"content":"hi","tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{}"}}]},"finish_reason":null}]}`,
		`{"CHOICES":[{"Index":0,"Delta":{"Content":"a"}}],"usage":{"prompt_tokens":1.5}}`, `{"choices":[{"index":"0"}]}`,
		`{"error":{"message":"x"},"error":null}`, "{\"choices\":[{\"delta\":{\"content\":\"\xff\"}}]}", `{"usage":{"total_tokens":1e3}}`,
		`{"type":"response.output_text.delta","output_index":0,"delta":"x","item":{"type":"message"}}`, `{"type":5}`, `[]`, `null`, `{"a":`,
		`{"type":"response.completed","response":{"usage":{"input_tokens":-1}}}`, `{"choices":[{"index":9999999999999999999}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		providertest.ChunkDecodeAgrees[chatChunk](t, data)
		providertest.ChunkDecodeAgrees[respEvent](t, data)
	})
}
