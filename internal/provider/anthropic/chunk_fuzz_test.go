package anthropic

import (
	"testing"

	"github.com/runnel/runnel/internal/provider/providertest"
)

// FuzzChunkDecodeAgrees: provider.DecodeChunk reads every Messages event
// exactly as encoding/json did, which the adapter was written and fuzzed
// against.
func FuzzChunkDecodeAgrees(f *testing.F) {
	for _, s := range []string{
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":"7"}}`,
		`{"type":"error","error":{"type":"overloaded_error","message":"x"}}`, `{"TYPE":"ping","Index":1.5}`, `[]`, `{"index":`,
		"{\"type\":\"\xff\"}", `{"type":"message_start","message":{"usage":{"input_tokens":1e400}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		providertest.ChunkDecodeAgrees[event](t, data)
	})
}
