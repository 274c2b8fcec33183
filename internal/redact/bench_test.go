package redact

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/runnel/runnel"
)

// benchSecrets returns n distinct API-key-like values of 40 bytes.
func benchSecrets(n int) []string {
	out := make([]string, n)
	for i := range out {
		sum := sha256.Sum256([]byte(strconv.Itoa(i)))
		out[i] = "sk-live-" + hex.EncodeToString(sum[:16])
	}
	return out
}

// benchAnswer is a 16 KB answer of prose, code and JSON with one secret in
// the middle, as a model might stream it.
func benchAnswer(secret string) string {
	para := "The deployment uses the staging cluster; run `kubectl get pods -n app` and check " +
		`the config {"region": "eu-west-1", "replicas": 3, "path": "C:\\data\/x"} before 100% rollout. `
	var b strings.Builder
	for b.Len() < 8<<10 {
		b.WriteString(para)
	}
	b.WriteString("The key is " + secret + ". ")
	for b.Len() < 16<<10 {
		b.WriteString(para)
	}
	return b.String()[:16<<10]
}

var benchSizes = []int{1, 1000, 100000}

// BenchmarkSink streams a 16 KB answer in 20-byte deltas through one run's
// Sink: the cost must not grow with the number of secrets.
func BenchmarkSink(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("secrets=%d", n), func(b *testing.B) {
			secrets := benchSecrets(n)
			r := New(secrets...)
			answer := benchAnswer(secrets[n/2])
			b.SetBytes(int64(len(answer)))
			for b.Loop() {
				s := r.Sink(runnel.Discard{})
				s.Emit(runnel.Event{Type: runnel.EventMessageStart, ID: "m"})
				for i := 0; i < len(answer); i += 20 {
					s.Emit(runnel.Event{Type: runnel.EventMessageDelta, ID: "m", Delta: answer[i:min(i+20, len(answer))]})
				}
				s.Emit(runnel.Event{Type: runnel.EventMessageEnd, ID: "m"})
			}
		})
	}
}

// BenchmarkString redacts the same answer at once, as Result does.
func BenchmarkString(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("secrets=%d", n), func(b *testing.B) {
			secrets := benchSecrets(n)
			r := New(secrets...)
			answer := benchAnswer(secrets[n/2])
			b.SetBytes(int64(len(answer)))
			for b.Loop() {
				if r.String(answer) == answer {
					b.Fatal("the secret was not redacted")
				}
			}
		})
	}
}

// BenchmarkNew builds one run's matcher.
func BenchmarkNew(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("secrets=%d", n), func(b *testing.B) {
			secrets := benchSecrets(n)
			b.ReportAllocs()
			for b.Loop() {
				New(secrets...)
			}
		})
	}
}

// BenchmarkStringMisread redacts 200 KB made of a secret whose last byte,
// a backslash, reads with the next one as an escape: the text after each
// is read again, within a budget that keeps the cost linear.
func BenchmarkStringMisread(b *testing.B) {
	r := New(`abc\`)
	text := strings.Repeat(`abc\b`, 40000)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		r.String(text)
	}
}
