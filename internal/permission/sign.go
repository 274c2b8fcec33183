package permission

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The ways a signature fails to verify.
var (
	ErrSignatureInvalid = errors.New("the signature does not verify for that call's id, name and arguments")
	ErrSignatureExpired = errors.New("the signature has expired")
)

// ClockSkew is how far in the future an issue time may lie: replicas'
// clocks differ a little.
const ClockSkew = 5 * time.Minute

// Sign returns the signature of an interaction issued at issued (DESIGN
// §5.4, the AI SDK v6 scheme with the issue time added, so that a
// signature can expire):
//
//	t + "." + base64url(HMAC-SHA256(secret, id + "\n" + toolCallID + "\n" + toolName + "\n" + base64url(SHA256(canonicalJSON(input))) + "\n" + t))
//
// where t is issued as Unix seconds in decimal. base64url is the unpadded
// URL alphabet (RFC 4648 §5, no '='), in both places. canonicalJSON is
// CanonicalJSON, with empty input read as {}; it does not apply the
// JSON-ish normalisation of call keys, so the signature covers exactly
// the input the person was shown. Sign fails on an empty secret and on
// input CanonicalJSON refuses.
func Sign(secret []byte, id, toolCallID, toolName string, input json.RawMessage, issued time.Time) (string, error) {
	if len(secret) == 0 {
		return "", errors.New("permission: empty interaction secret")
	}
	t := strconv.FormatInt(issued.Unix(), 10)
	mac, err := interactionMAC(secret, id, toolCallID, toolName, input, t)
	if err != nil {
		return "", fmt.Errorf("permission: signing interaction %s: %w", id, err)
	}
	return t + "." + base64.RawURLEncoding.EncodeToString(mac), nil
}

func interactionMAC(secret []byte, id, toolCallID, toolName string, input json.RawMessage, t string) ([]byte, error) {
	canonical, err := CanonicalJSON(input)
	if err != nil {
		return nil, err
	}
	digest := sha256.Sum256(canonical)
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(id + "\n" + toolCallID + "\n" + toolName + "\n" + base64.RawURLEncoding.EncodeToString(digest[:]) + "\n" + t))
	return mac.Sum(nil), nil
}

// Verify checks that signature is Sign's signature for the same
// interaction, comparing in constant time, and that it was issued no
// longer than ttl before now (and not more than ClockSkew after it). It
// returns nil, ErrSignatureInvalid or ErrSignatureExpired.
func Verify(secret []byte, signature, id, toolCallID, toolName string, input json.RawMessage, now time.Time, ttl time.Duration) error {
	t, sig, ok := strings.Cut(signature, ".")
	issued, err := strconv.ParseInt(t, 10, 64)
	if !ok || err != nil || issued < 0 || len(secret) == 0 || t != strconv.FormatInt(issued, 10) {
		return ErrSignatureInvalid
	}
	want, err := interactionMAC(secret, id, toolCallID, toolName, input, t)
	got, decErr := base64.RawURLEncoding.Strict().DecodeString(sig)
	if err != nil || decErr != nil || !hmac.Equal(want, got) {
		return ErrSignatureInvalid
	}
	// Compared in seconds: an issue time near the int64 limits must not
	// overflow into a valid-looking age.
	age := now.Unix() - issued
	if age > int64(ttl/time.Second) || -age > int64(ClockSkew/time.Second) {
		return ErrSignatureExpired
	}
	return nil
}
