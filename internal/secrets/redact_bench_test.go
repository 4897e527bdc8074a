package secrets_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/runbook/runbook/internal/secrets"
)

// BenchmarkString masks a 200-byte log line holding one secret, with ten
// secrets registered, and the same line with nothing registered.
func BenchmarkString(b *testing.B) {
	line := strings.Repeat("cluster c1 upgrade progressing; ", 5) + "token=secret-value-3 done"
	full := secrets.NewRedactor()
	for i := range 10 {
		full.Add(fmt.Sprintf("secret-value-%d", i))
	}
	for _, bc := range []struct {
		name string
		r    *secrets.Redactor
	}{{"ten-secrets", full}, {"none", secrets.NewRedactor()}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = bc.r.String(line)
			}
		})
	}
}

// BenchmarkRedactKB masks one KB of command output with 20 secrets of 32
// bytes registered (every form: encodings, digests, fragments): clean
// output, and output holding two secrets, one upper-cased. The issue's
// budget is 2 µs per KB; the ns/op figure is the cost of one KB.
func BenchmarkRedactKB(b *testing.B) {
	r := secrets.NewRedactor()
	var vals []string
	for i := range 20 {
		v := fmt.Sprintf("tok-%02d-%s", i, strings.Repeat(string(rune('a'+i)), 25))
		vals = append(vals, v)
		r.Add(v)
	}
	var clean strings.Builder
	for clean.Len() < 1024 {
		clean.WriteString("2026-11-03T10:00:00Z node-group default-worker scaled to 3 nodes; status=ok\n")
	}
	kb := clean.String()[:1024]
	leaky := kb[:300] + vals[3] + kb[300+len(vals[3]):700] + strings.ToUpper(vals[17]) + kb[700+len(vals[17]):]
	for _, bc := range []struct{ name, text string }{{"clean", kb}, {"two-secrets", leaky}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.text)))
			b.ReportAllocs()
			for b.Loop() {
				_ = r.String(bc.text)
			}
		})
	}
}
