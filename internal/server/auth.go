package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/runnel/runnel"
)

// authed requires the server token on h. With no token configured (which
// cmd/runnel allows on loopback only) it requires a loopback Host instead.
func (s *Server) authed(h http.Handler) http.Handler {
	if s.opts.Token == "" {
		return s.loopbackOnly(h)
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

// loopbackOnly refuses requests addressed to a name other than a loopback
// one when the server has no token. A page on another site whose name
// its owner re-points at 127.0.0.1 (DNS rebinding) is same-origin to the
// browser, and could otherwise drive a tokenless runnel (and its run
// profiles' keys) through a visitor's browser; its requests carry the
// site's name in Host.
func (s *Server) loopbackOnly(h http.Handler) http.Handler {
	if s.opts.Token != "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHost(r.Host) {
			s.writeError(w, r, &runnel.Error{Code: runnel.CodeUnauthorized, Message: "this runnel has no token, so it answers only requests addressed to 127.0.0.1, [::1] or localhost; " +
				"use one of those, or set RUNNEL_TOKEN on the server and send it"})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether a Host header names this machine's
// loopback: an IP literal in 127.0.0.0/8 or ::1, or localhost.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
