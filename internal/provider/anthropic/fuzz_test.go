package anthropic_test

import (
	"testing"

	"github.com/runnel/runnel/internal/llmtest"
)

// FuzzMessagesStream fuzzes the adapter's reading of its event stream
// (providertest.FuzzStream says what is checked).
func FuzzMessagesStream(f *testing.F) {
	claude.FuzzStream(f, llmtest.APIMessages)
}
