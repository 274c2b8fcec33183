package run

import (
	"maps"
	"strings"

	"github.com/runnel/runnel"
)

// connection is how a request reaches its model: modelConnection when the
// request has one (DESIGN §3.7; it wins over the top-level fields), else
// the top-level provider, endpoint and secrets.
type connection struct {
	// provider is the provider family; empty means the model's prefix or
	// its name decides.
	provider string
	endpoint *runnel.Endpoint
	// secrets are the credentials by environment-variable name.
	secrets map[string]string
	// runtime says the host supplies the key (credentialMode
	// "runtime_provided"), from Options.ProviderKeys; fromConnection says
	// the request used modelConnection, for the sentences that name it.
	runtime        bool
	fromConnection bool
}

// connectionOf reads req's connection. A modelConnection credential bound
// to a header becomes an endpoint header; one bound to an environment
// variable becomes a secret of that name. Both are secrets of the run
// (secretValues).
func connectionOf(req *runnel.RunRequest) connection {
	mc := req.ModelConnection
	if mc == nil {
		return connection{provider: req.Provider, endpoint: req.Endpoint, secrets: req.Secrets}
	}
	c := connection{provider: mc.Provider, secrets: map[string]string{}, fromConnection: true,
		runtime: strings.EqualFold(strings.TrimSpace(mc.CredentialMode), runnel.CredentialModeRuntimeProvided)}
	if mc.Endpoint != nil {
		ep := *mc.Endpoint
		ep.Headers = maps.Clone(ep.Headers)
		c.endpoint = &ep
	}
	for _, cred := range mc.Credentials {
		switch strings.ToLower(cred.Binding.Kind) {
		case runnel.BindingHeader:
			if c.endpoint == nil {
				c.endpoint = &runnel.Endpoint{}
			}
			if c.endpoint.Headers == nil {
				c.endpoint.Headers = map[string]string{}
			}
			c.endpoint.Headers[cred.Binding.Name] = cred.Value
		default: // "environment", and a binding that names no kind
			c.secrets[cred.Binding.Name] = cred.Value
		}
	}
	return c
}

// credentialValues are the secret values of a request's modelConnection
// and of its MCP servers' credentials.
func credentialValues(req *runnel.RunRequest) []string {
	var out []string
	if mc := req.ModelConnection; mc != nil {
		for _, c := range mc.Credentials {
			out = append(out, c.Value)
		}
		if mc.Endpoint != nil {
			for _, v := range mc.Endpoint.Headers {
				out = append(out, v)
			}
		}
	}
	for _, s := range req.McpServers {
		if s.Connection != nil {
			for _, c := range s.Connection.Credentials {
				out = append(out, c.Value)
			}
		}
	}
	return out
}
