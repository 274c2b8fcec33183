package run

import (
	"fmt"

	"github.com/runnel/runnel/internal/provider"
	"github.com/runnel/runnel/internal/provider/anthropic"
	"github.com/runnel/runnel/internal/provider/openai"
)

// DefaultModelFactory builds runnel's real adapters.
func DefaultModelFactory(api string, cfg provider.Config) (provider.Model, error) {
	switch api {
	case APIOpenAIChat:
		return openai.NewChat(cfg), nil
	case APIOpenAIResponses:
		return openai.NewResponses(cfg), nil
	case APIAnthropic:
		return anthropic.New(cfg), nil
	}
	return nil, fmt.Errorf("no adapter for model API %q", api)
}
