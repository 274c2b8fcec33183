package openai_test

import (
	"testing"

	"github.com/runnel/runnel/internal/llmtest"
	"github.com/runnel/runnel/internal/provider"
	"github.com/runnel/runnel/internal/provider/openai"
)

// FuzzChatStream fuzzes the Chat Completions adapter's reading of its
// event stream (providertest.FuzzStream says what is checked).
func FuzzChatStream(f *testing.F) {
	a := openAI
	a.New = func(c provider.Config) provider.Model { return openai.NewChat(c) }
	a.FuzzStream(f, llmtest.APIChat)
}

// FuzzResponsesStream fuzzes the Responses adapter's reading of its event
// stream.
func FuzzResponsesStream(f *testing.F) {
	a := openAI
	a.New = func(c provider.Config) provider.Model { return openai.NewResponses(c) }
	a.FuzzStream(f, llmtest.APIResponses)
}
