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
