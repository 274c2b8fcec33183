package permission

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// This file writes JSON the way JavaScript's JSON.stringify does, with
// object keys sorted as JavaScript's default sort orders them, so that a
// key or a signature computed here agrees with one computed in a browser
// or in the Agenta runner.

// errNotFinite rejects numbers that overflow float64: JSON.stringify would
// write them as null, and two different calls must not share a key.
var errNotFinite = errors.New("number is not finite")

// utf16Units walks a WTF-8 string as UTF-16 code units.
type utf16Units struct {
	s       string
	low     uint16 // the second half of a pair, returned next
	pending bool
}

func (u *utf16Units) next() (uint16, bool) {
	if u.pending {
		u.pending = false
		return u.low, true
	}
	if u.s == "" {
		return 0, false
	}
	r, n := decodeWTF8(u.s)
	u.s = u.s[n:]
	if r >= 0x10000 {
		hi, lo := utf16.EncodeRune(r)
		u.low, u.pending = uint16(lo), true
		return uint16(hi), true
	}
	return uint16(r), true
}

// compareUTF16 orders strings by UTF-16 code units, as JavaScript's default
// sort does. It differs from byte order: U+FF61 sorts after U+1F600 here
// (0xFF61 > 0xD83D) but before it in UTF-8.
func compareUTF16(a, b string) int {
	ua, ub := utf16Units{s: a}, utf16Units{s: b}
	for {
		x, okA := ua.next()
		y, okB := ub.next()
		switch {
		case !okA && !okB:
			return 0
		case !okA:
			return -1
		case !okB:
			return 1
		case x != y:
			if x < y {
				return -1
			}
			return 1
		}
	}
}

// appendCanonical writes v as JSON.stringify would after sorting every
// object's keys by UTF-16 code units. It fails on a number that is not
// finite.
func appendCanonical(b []byte, v jsonValue) ([]byte, error) {
	switch v.kind {
	case jsonNull:
		return append(b, "null"...), nil
	case jsonBool:
		return strconv.AppendBool(b, v.boolean), nil
	case jsonNumber:
		f, err := strconv.ParseFloat(v.text, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return nil, fmt.Errorf("number %q: %w", v.text, err)
		}
		// ErrRange on underflow still gives the value JavaScript gets
		// (0 or a subnormal); on overflow it gives ±Inf, refused below.
		s, err := formatJSNumber(f)
		if err != nil {
			return nil, err
		}
		return append(b, s...), nil
	case jsonString:
		return appendJSString(b, v.text), nil
	case jsonArray:
		b = append(b, '[')
		for i, item := range v.items {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendCanonical(b, item); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case jsonObject:
		members := slices.Clone(v.members)
		slices.SortStableFunc(members, func(x, y jsonMember) int { return compareUTF16(x.key, y.key) })
		b = append(b, '{')
		for i, m := range members {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSString(b, m.key)
			b = append(b, ':')
			var err error
			if b, err = appendCanonical(b, m.value); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	}
	return nil, fmt.Errorf("unknown JSON kind %d", v.kind)
}

// formatJSNumber prints f as ECMAScript Number::toString does: the
// shortest digits that round-trip, laid out by the exponent rules
// (21 digits before the point at most, six leading zeros after it).
func formatJSNumber(f float64) (string, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", errNotFinite
	}
	if f == 0 {
		return "0", nil // -0 too
	}
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	mantissa, exp, _ := strings.Cut(strconv.FormatFloat(f, 'e', -1, 64), "e")
	digits := strings.Replace(mantissa, ".", "", 1)
	e, _ := strconv.Atoi(exp) // FormatFloat always writes a valid exponent
	k, n := len(digits), e+1  // f = 0.digits × 10^n
	switch {
	case k <= n && n <= 21:
		return sign + digits + strings.Repeat("0", n-k), nil
	case 0 < n && n <= 21:
		return sign + digits[:n] + "." + digits[n:], nil
	case -6 < n && n <= 0:
		return sign + "0." + strings.Repeat("0", -n) + digits, nil
	}
	s := digits[:1]
	if k > 1 {
		s += "." + digits[1:]
	}
	if n-1 >= 0 {
		return sign + s + "e+" + strconv.Itoa(n-1), nil
	}
	return sign + s + "e-" + strconv.Itoa(1-n), nil
}

// appendJSString writes s quoted as JSON.stringify does: only the quote,
// the backslash and control characters are escaped (the short forms where
// they exist, else \u00xx), and lone surrogates as \udxxx. Everything else,
// including <, >, & and U+2028, stays as it is.
func appendJSString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		r, n := decodeWTF8(s[i:])
		if isHighSurrogate(r) {
			// The parser joins pairs; an encoder that joins them too stays
			// correct whatever string it is given.
			if r2, n2 := decodeWTF8(s[i+n:]); isLowSurrogate(r2) {
				r, n = utf16.DecodeRune(r, r2), n+n2
			}
		}
		i += n
		switch {
		case r == '"':
			b = append(b, '\\', '"')
		case r == '\\':
			b = append(b, '\\', '\\')
		case r == '\b':
			b = append(b, '\\', 'b')
		case r == '\f':
			b = append(b, '\\', 'f')
		case r == '\n':
			b = append(b, '\\', 'n')
		case r == '\r':
			b = append(b, '\\', 'r')
		case r == '\t':
			b = append(b, '\\', 't')
		case r < 0x20 || isSurrogate(r):
			b = append(b, '\\', 'u', hex[r>>12&0xF], hex[r>>8&0xF], hex[r>>4&0xF], hex[r&0xF])
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	return append(b, '"')
}
