package permission

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// The input as a platform might send it back: other key order, other
// whitespace, 1.50 for 1.5 and an escape for U+2028.
const signedInput = `{ "｡": "<&>\u2028", "😀": [1.50, null], "b": 1.0, "a": "x" }`

var issued = time.Unix(1767225600, 0) // 2026-01-01T00:00:00Z

func TestSignFixedVector(t *testing.T) {
	secret := []byte("s3cret-key")
	// Computed outside Go, with Python's hmac over the JSON.stringify
	// canonical form {"a":"x","b":1,"😀":[1.5,null],"｡":"<&>\u2028"}.
	const want = "1767225600.iggOR96TiceLft77AN5AdzQEqPZ5hXcRzO5nIc2_o1M"
	got, err := Sign(secret, "int_1", "call_1", "send_email", json.RawMessage(signedInput), issued)
	if err != nil || got != want {
		t.Fatalf("Sign = %q, %v; want %q", got, err, want)
	}

	// The same, from the primitives, written out step by step.
	canonical := "{\"a\":\"x\",\"b\":1,\"😀\":[1.5,null],\"｡\":\"<&>\u2028\"}"
	digest := sha256.Sum256([]byte(canonical))
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("int_1\ncall_1\nsend_email\n" + base64.RawURLEncoding.EncodeToString(digest[:]) + "\n1767225600"))
	if byHand := "1767225600." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil)); byHand != want {
		t.Fatalf("by hand = %q, want %q", byHand, want)
	}
}

func TestVerify(t *testing.T) {
	secret := []byte("s3cret-key")
	sig, err := Sign(secret, "int_1", "call_1", "send_email", json.RawMessage(signedInput), issued)
	if err != nil {
		t.Fatal(err)
	}
	day := 24 * time.Hour
	if err := Verify(secret, sig, "int_1", "call_1", "send_email", json.RawMessage(`{"a":"x","b":1,"😀":[1.5,null],"｡":"<&>\u2028"}`), issued.Add(time.Hour), day); err != nil {
		t.Fatalf("Verify refused the same interaction written differently: %v", err)
	}
	later, _ := Sign(secret, "int_1", "call_1", "send_email", json.RawMessage(signedInput), issued.Add(time.Second))
	tests := []struct {
		name                  string
		secret                string
		sig, id, callID, tool string
		input                 string
		now                   time.Time
		want                  error
	}{
		{"other secret", "other", sig, "int_1", "call_1", "send_email", signedInput, issued, ErrSignatureInvalid},
		{"other id", "s3cret-key", sig, "int_2", "call_1", "send_email", signedInput, issued, ErrSignatureInvalid},
		{"other call", "s3cret-key", sig, "int_1", "call_2", "send_email", signedInput, issued, ErrSignatureInvalid},
		{"other tool", "s3cret-key", sig, "int_1", "call_1", "delete_email", signedInput, issued, ErrSignatureInvalid},
		{"other input", "s3cret-key", sig, "int_1", "call_1", "send_email", `{"a":"y","b":1,"😀":[1.5,null],"｡":"<&>\u2028"}`, issued, ErrSignatureInvalid},
		{"padded signature", "s3cret-key", sig + "=", "int_1", "call_1", "send_email", signedInput, issued, ErrSignatureInvalid},
		{"empty signature", "s3cret-key", "", "int_1", "call_1", "send_email", signedInput, issued, ErrSignatureInvalid},
		{"invalid input", "s3cret-key", sig, "int_1", "call_1", "send_email", `{`, issued, ErrSignatureInvalid},
		{"empty secret", "", sig, "int_1", "call_1", "send_email", signedInput, issued, ErrSignatureInvalid},
		// The issue time is signed: moving it forward breaks the MAC.
		{"issue time edited", "s3cret-key", "1767225601" + sig[len("1767225600"):], "int_1", "call_1", "send_email", signedInput, issued, ErrSignatureInvalid},
		{"issue time with a sign", "s3cret-key", "+" + sig, "int_1", "call_1", "send_email", signedInput, issued, ErrSignatureInvalid},
		{"no issue time", "s3cret-key", sig[len("1767225600."):], "int_1", "call_1", "send_email", signedInput, issued, ErrSignatureInvalid},
		{"past its lifetime", "s3cret-key", sig, "int_1", "call_1", "send_email", signedInput, issued.Add(day + time.Second), ErrSignatureExpired},
		{"at the end of its lifetime", "s3cret-key", sig, "int_1", "call_1", "send_email", signedInput, issued.Add(day), nil},
		{"issued too far in the future", "s3cret-key", later, "int_1", "call_1", "send_email", signedInput, issued.Add(-ClockSkew), ErrSignatureExpired},
		{"issued a little in the future", "s3cret-key", later, "int_1", "call_1", "send_email", signedInput, issued.Add(time.Second - ClockSkew), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Verify([]byte(tt.secret), tt.sig, tt.id, tt.callID, tt.tool, json.RawMessage(tt.input), tt.now, day)
			if !errors.Is(err, tt.want) || (err == nil) != (tt.want == nil) {
				t.Errorf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
	if _, err := Sign(nil, "i", "c", "t", nil, issued); err == nil {
		t.Error("Sign with an empty secret succeeded")
	}
}
