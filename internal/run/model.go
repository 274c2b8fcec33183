package run

import (
	"strings"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/provider"
)

// The model APIs a ModelFactory is asked for. Every provider name that is
// not built in is an OpenAI-compatible Chat Completions server, so it uses
// APIOpenAIChat with the request's endpoint.baseUrl.
const (
	APIOpenAIChat      = "openai"
	APIOpenAIResponses = "openai-responses"
	APIAnthropic       = "anthropic"
)

// ModelFactory builds the adapter for one of the model APIs above.
type ModelFactory func(api string, cfg provider.Config) (provider.Model, error)

// modelRef is a request's model, resolved.
type modelRef struct {
	// provider is the provider name as the request gave or implied it.
	provider string
	// id is the model id sent to the API.
	id string
	// api is the API the adapter speaks.
	api string
	cfg provider.Config
}

// resolveModel reads the model and its connection (DESIGN §3.1, §3.7).
// keys are the operator's provider keys, for a connection whose
// credentials the host provides.
func resolveModel(req *runnel.RunRequest, conn connection, keys map[string]string) (*modelRef, error) {
	model := strings.TrimSpace(req.Model)
	if model == "" {
		return nil, invalid(`No model given: set "model" to "provider/model-id" (for example "openai/gpt-5" or "anthropic/claude-sonnet-4-5").`)
	}
	ref := &modelRef{provider: strings.ToLower(strings.TrimSpace(conn.provider)), id: model}
	switch {
	case ref.provider != "":
		// "openai" + "openai/gpt-5" names the provider twice; any other
		// slash is part of the id ("openrouter" + "meta-llama/llama-3").
		if p, id, ok := strings.Cut(model, "/"); ok && strings.EqualFold(p, ref.provider) {
			ref.id = id
		}
	case strings.Contains(model, "/"):
		p, id, _ := strings.Cut(model, "/")
		ref.provider, ref.id = strings.ToLower(p), id
	case strings.HasPrefix(strings.ToLower(model), "claude"):
		ref.provider = APIAnthropic
	default:
		ref.provider = APIOpenAIChat
	}
	if ref.id == "" {
		return nil, invalid("Model %q has no model id after the provider; use \"provider/model-id\".", req.Model)
	}
	if !validProviderName(ref.provider) {
		return nil, invalid("Provider %q is not a valid provider name.", ref.provider)
	}
	var baseURL string
	if ep := conn.endpoint; ep != nil {
		baseURL = strings.TrimSpace(ep.BaseURL)
		ref.cfg = provider.Config{BaseURL: baseURL, APIVersion: ep.APIVersion, Headers: ep.Headers}
	}
	keyName := "OPENAI_API_KEY"
	switch ref.provider {
	case APIOpenAIChat, APIOpenAIResponses:
		ref.api = ref.provider
	case APIAnthropic:
		ref.api, keyName = APIAnthropic, "ANTHROPIC_API_KEY"
	default:
		if baseURL == "" {
			return nil, invalid(`Provider %q is not built in; set endpoint.baseUrl to its OpenAI-compatible API, or use one of the built-in providers: openai, openai-responses, anthropic.`, ref.provider)
		}
		ref.api = APIOpenAIChat
		keyName = envName(ref.provider) + "_API_KEY"
	}
	secrets := conn.secrets
	if conn.runtime {
		if len(keys) == 0 {
			return nil, invalid("The request asks runnel to provide the credential for provider %q (modelConnection.credentialMode \"runtime_provided\"), but this runnel has no provider keys: set RUNNEL_PROVIDER_KEYS_FILE on the server to a file of NAME=value lines (%s=…), or send the credential in modelConnection.credentials.", ref.provider, keyName)
		}
		secrets = keys
	}
	key, ok := secret(secrets, keyName)
	if !ok && ref.api == APIOpenAIChat && keyName != "OPENAI_API_KEY" {
		key, ok = secret(secrets, "OPENAI_API_KEY")
	}
	// A custom endpoint may need no key (Ollama, llama.cpp, a proxy that
	// adds its own); the provider's own API always does.
	switch {
	case ok || baseURL != "":
	case conn.runtime:
		return nil, invalid("This runnel's provider keys (RUNNEL_PROVIDER_KEYS_FILE) hold no %s for provider %q; add it there, or send the credential in modelConnection.credentials.", keyName, ref.provider)
	case conn.fromConnection:
		return nil, invalid("No API key for provider %q: add a credential bound to the environment variable %s to modelConnection.credentials.", ref.provider, keyName)
	default:
		return nil, invalid("No API key for provider %q: set secrets.%s.", ref.provider, keyName)
	}
	ref.cfg.APIKey = key
	return ref, nil
}

// secret finds a secret by env-style name, exactly or ignoring case.
func secret(secrets map[string]string, name string) (string, bool) {
	if v, ok := secrets[name]; ok && v != "" {
		return v, true
	}
	for k, v := range secrets {
		if strings.EqualFold(k, name) && v != "" {
			return v, true
		}
	}
	return "", false
}

func validProviderName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// envName is a provider name as an environment variable prefix:
// "open-router" → "OPEN_ROUTER".
func envName(name string) string {
	return strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' {
			return c - 'a' + 'A'
		}
		if c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' {
			return c
		}
		return '_'
	}, name)
}
