package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/server"
	"github.com/runnel/runnel/internal/strictjson"
)

// profilesFile is RUNNEL_PROFILES_FILE: the run profiles a /v1/chat
// request may name, so that a browser never holds a provider key.
//
//	{"profiles": [{
//	  "name": "gpt", "label": "GPT-5", "default": true,
//	  "run": {"model": "openai/gpt-5", "customTools": […], "toolCallback": {…}, "permissions": {…}},
//	  "secrets": {"OPENAI_API_KEY": {"env": "OPENAI_API_KEY"}}
//	}]}
//
// A secret is a reference, read once at start-up: {"env": NAME} (runnel's
// environment) or {"file": PATH}. Keys are never written in the file.
type profilesFile struct {
	Profiles []profileSpec `json:"profiles"`
}

type profileSpec struct {
	Name    string                `json:"name"`
	Label   string                `json:"label"`
	Default bool                  `json:"default"`
	Run     json.RawMessage       `json:"run"`
	Secrets map[string]secretFrom `json:"secrets"`
}

type secretFrom struct {
	Env  string `json:"env"`
	File string `json:"file"`
}

// loadProfiles reads a profiles file into server profiles, and returns
// the secret values they hold so that every log and run redacts them. A
// file that cannot be read fails start-up with a sentence per problem.
func loadProfiles(path string, getenv func(string) string) ([]server.Profile, []string, error) {
	if path == "" {
		return nil, nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the profiles file: %w", err)
	}
	var f profilesFile
	if err := strictjson.Unmarshal(data, &f); err != nil {
		return nil, nil, fmt.Errorf("the profiles file %s is not valid: %w", path, err)
	}
	var out []server.Profile
	var secrets []string
	var errs []error
	seen, defaults := map[string]bool{}, 0
	for i, spec := range f.Profiles {
		p, values, err := spec.profile(getenv)
		if err == nil && seen[spec.Name] {
			err = fmt.Errorf("the name %q is taken by an earlier profile", spec.Name)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: profiles[%d]: %w", path, i, err))
			continue
		}
		seen[spec.Name] = true
		if spec.Default {
			defaults++
		}
		out = append(out, p)
		secrets = append(secrets, values...)
	}
	if defaults > 1 {
		errs = append(errs, fmt.Errorf("%s: %d profiles say \"default\": true; mark one", path, defaults))
	}
	if len(f.Profiles) == 0 {
		errs = append(errs, fmt.Errorf("%s has no profiles; write {\"profiles\": [{\"name\": …, \"run\": {…}}]}", path))
	}
	return out, secrets, errors.Join(errs...)
}

func (spec profileSpec) profile(getenv func(string) string) (server.Profile, []string, error) {
	if strings.TrimSpace(spec.Name) == "" {
		return server.Profile{}, nil, errors.New("a profile needs a name")
	}
	var req runnel.RunRequest
	if err := strictjson.Unmarshal(orObject(spec.Run), &req); err != nil {
		return server.Profile{}, nil, fmt.Errorf("its run is not a run request: %w", err)
	}
	switch {
	case len(req.Messages) > 0:
		return server.Profile{}, nil, errors.New("its run has messages; the conversation comes from the chat")
	case len(req.Secrets) > 0:
		return server.Profile{}, nil, errors.New(`its run has secrets written out; reference them instead: "secrets": {"OPENAI_API_KEY": {"env": "OPENAI_API_KEY"}} or {"file": "/run/secrets/openai"}`)
	}
	secrets := map[string]string{}
	for name, from := range spec.Secrets {
		v, err := from.read(getenv)
		if err != nil {
			return server.Profile{}, nil, fmt.Errorf("secret %s: %w", name, err)
		}
		secrets[name] = v
	}
	run := orObject(spec.Run)
	values := make([]string, 0, len(secrets))
	for _, v := range secrets {
		values = append(values, v)
	}
	return server.Profile{
		Name: spec.Name, Label: spec.Label, Model: req.Model, Default: spec.Default,
		// Decoded anew for every request, so no run can change another's.
		Run: func() (*runnel.RunRequest, error) {
			var r runnel.RunRequest
			if err := strictjson.Unmarshal(run, &r); err != nil {
				return nil, err
			}
			if len(secrets) > 0 {
				r.Secrets = make(map[string]string, len(secrets))
				for k, v := range secrets {
					r.Secrets[k] = v
				}
			}
			return &r, nil
		},
	}, values, nil
}

// read resolves a secret reference. The value is never in an error.
func (s secretFrom) read(getenv func(string) string) (string, error) {
	switch {
	case s.Env != "" && s.File != "":
		return "", errors.New(`give "env" or "file", not both`)
	case s.Env != "":
		v := strings.TrimSpace(getenv(s.Env))
		if v == "" {
			return "", fmt.Errorf("the environment variable %s is not set", s.Env)
		}
		return v, nil
	case s.File != "":
		b, err := os.ReadFile(s.File)
		if err != nil {
			return "", fmt.Errorf("reading %s: %w", s.File, err)
		}
		v := strings.TrimSpace(string(b))
		if v == "" {
			return "", fmt.Errorf("%s is empty", s.File)
		}
		return v, nil
	}
	return "", errors.New(`a secret is {"env": NAME} or {"file": PATH}`)
}

func orObject(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return []byte(`{}`)
	}
	return raw
}
