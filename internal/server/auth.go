package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/runnel/runnel"
)

// authed requires the server token on h. With no token configured it is h.
func (s *Server) authed(h http.Handler) http.Handler {
	if s.opts.Token == "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.tokenOK(r) {
			s.writeError(w, r, &runnel.Error{Code: runnel.CodeUnauthorized, Message: "Unauthorized"})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// tokenOK reports whether any presented token is the server's. Hashing both
// sides makes the comparison constant-time and equal-length, so neither the
// token's content nor its length leaks through timing. A presented token
// that is empty once trimmed ("Bearer \u00a0") is never compared: an
// empty token is no token.
func (s *Server) tokenOK(r *http.Request) bool {
	match := 0
	for _, t := range presentedTokens(r) {
		if t == "" {
			continue
		}
		h := sha256.Sum256([]byte(t))
		match |= subtle.ConstantTimeCompare(h[:], s.tokenHash[:])
	}
	return match == 1
}

func presentedTokens(r *http.Request) []string {
	var tokens []string
	if a := r.Header.Get("Authorization"); a != "" {
		scheme, tok, ok := strings.Cut(a, " ")
		if ok && strings.EqualFold(scheme, "Bearer") {
			tokens = append(tokens, strings.TrimSpace(tok))
		}
	}
	// X-Agenta-Runner-Token lets an Agenta deployment point at runnel unchanged.
	for _, h := range [...]string{"X-Runnel-Token", "X-Agenta-Runner-Token"} {
		if v := r.Header.Get(h); v != "" {
			tokens = append(tokens, strings.TrimSpace(v))
		}
	}
	return tokens
}
