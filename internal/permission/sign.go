package permission

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
)

// Sign returns the signature of an interaction (DESIGN §5.4, the AI SDK v6
// scheme):
//
//	base64url(HMAC-SHA256(secret, id + "\n" + toolCallID + "\n" + toolName + "\n" + base64url(SHA256(canonicalJSON(input)))))
//
// base64url is the unpadded URL alphabet (RFC 4648 §5, no '='), in both
// places. canonicalJSON is CanonicalJSON, with empty input read as {}; it
// does not apply the JSON-ish normalisation of call keys, so the signature
// covers exactly the input the person was shown. Sign fails on an empty
// secret and on input CanonicalJSON refuses.
func Sign(secret []byte, id, toolCallID, toolName string, input json.RawMessage) (string, error) {
	if len(secret) == 0 {
		return "", errors.New("permission: empty interaction secret")
	}
	canonical, err := CanonicalJSON(input)
	if err != nil {
		return "", fmt.Errorf("permission: signing interaction %s: %w", id, err)
	}
	digest := sha256.Sum256(canonical)
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(id + "\n" + toolCallID + "\n" + toolName + "\n" + base64.RawURLEncoding.EncodeToString(digest[:])))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil)), nil
}

// Verify reports whether signature is Sign's signature for the same
// interaction, comparing in constant time.
func Verify(secret []byte, signature, id, toolCallID, toolName string, input json.RawMessage) bool {
	want, err := Sign(secret, id, toolCallID, toolName, input)
	return err == nil && hmac.Equal([]byte(want), []byte(signature))
}
