package provider

import (
	"errors"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// DecodeChunk decodes one streamed event of a provider's answer into v
// with exactly encoding/json's rules (names matched ignoring case, invalid
// UTF-8 replaced, the last of two equal names kept: what every adapter was
// written and fuzzed against), through encoding/json/v2's decoder, which
// reads a typical chunk in less than half the time. A chunk is decoded for
// every piece a model streams, so this is the per-token cost.
func DecodeChunk(data []byte, v any) error {
	return jsonv2.Unmarshal(data, v, jsonv1.DefaultOptionsV1())
}

// IsTypeMismatch reports whether a DecodeChunk error is a value of the
// wrong type (a string where a number belongs), not malformed JSON.
func IsTypeMismatch(err error) bool {
	var te *jsonv1.UnmarshalTypeError
	return errors.As(err, &te)
}
