package provider

// Temporary: pins the SDK dependencies in go.mod while the adapters are written.
import (
	_ "github.com/anthropics/anthropic-sdk-go"
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/openai/openai-go/v3"
	_ "go.uber.org/goleak"
)
