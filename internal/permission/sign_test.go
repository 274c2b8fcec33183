package permission

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"testing"
)

// The input as a platform might send it back: other key order, other
// whitespace, 1.50 for 1.5 and an escape for U+2028.
const signedInput = `{ "｡": "<&>\u2028", "😀": [1.50, null], "b": 1.0, "a": "x" }`

func TestSignFixedVector(t *testing.T) {
	secret := []byte("s3cret-key")
	// Computed outside Go, with Node's crypto over the JSON.stringify
	// canonical form {"a":"x","b":1,"😀":[1.5,null],"｡":"<&>\u2028"}.
	const want = "xBljHQQFaF1GzQ_yLH9yg_F4JWRNIEAuBQM5k18OIjE"
	got, err := Sign(secret, "int_1", "call_1", "send_email", json.RawMessage(signedInput))
	if err != nil || got != want {
		t.Fatalf("Sign = %q, %v; want %q", got, err, want)
	}

	// The same, from the primitives, written out step by step.
	canonical := "{\"a\":\"x\",\"b\":1,\"😀\":[1.5,null],\"｡\":\"<&>\u2028\"}"
	digest := sha256.Sum256([]byte(canonical))
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("int_1\ncall_1\nsend_email\n" + base64.RawURLEncoding.EncodeToString(digest[:])))
	if byHand := base64.RawURLEncoding.EncodeToString(mac.Sum(nil)); byHand != want {
		t.Fatalf("by hand = %q, want %q", byHand, want)
	}
}

func TestVerify(t *testing.T) {
	secret := []byte("s3cret-key")
	sig, err := Sign(secret, "int_1", "call_1", "send_email", json.RawMessage(signedInput))
	if err != nil {
		t.Fatal(err)
	}
	if !Verify(secret, sig, "int_1", "call_1", "send_email", json.RawMessage(`{"a":"x","b":1,"😀":[1.5,null],"｡":"<&>\u2028"}`)) {
		t.Fatal("Verify refused the same interaction written differently")
	}
	tests := []struct {
		name                  string
		secret                string
		sig, id, callID, tool string
		input                 string
	}{
		{"other secret", "other", sig, "int_1", "call_1", "send_email", signedInput},
		{"other id", "s3cret-key", sig, "int_2", "call_1", "send_email", signedInput},
		{"other call", "s3cret-key", sig, "int_1", "call_2", "send_email", signedInput},
		{"other tool", "s3cret-key", sig, "int_1", "call_1", "delete_email", signedInput},
		{"other input", "s3cret-key", sig, "int_1", "call_1", "send_email", `{"a":"y","b":1,"😀":[1.5,null],"｡":"<&>\u2028"}`},
		{"padded signature", "s3cret-key", sig + "=", "int_1", "call_1", "send_email", signedInput},
		{"empty signature", "s3cret-key", "", "int_1", "call_1", "send_email", signedInput},
		{"invalid input", "s3cret-key", sig, "int_1", "call_1", "send_email", `{`},
		{"empty secret", "", sig, "int_1", "call_1", "send_email", signedInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if Verify([]byte(tt.secret), tt.sig, tt.id, tt.callID, tt.tool, json.RawMessage(tt.input)) {
				t.Error("Verify accepted it")
			}
		})
	}
	if _, err := Sign(nil, "i", "c", "t", nil); err == nil {
		t.Error("Sign with an empty secret succeeded")
	}
}
