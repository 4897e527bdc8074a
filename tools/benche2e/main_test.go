package benche2e

import (
	"os"
	"testing"

	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// build compiles runbook into a directory of t's.
func build(t *testing.T) string {
	t.Helper()
	bin, err := Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// loadAverage is the first three fields of /proc/loadavg.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil || len(b) < 14 {
		return "unknown"
	}
	f := string(b)
	n := 0
	for i, r := range f {
		if r == ' ' {
			n++
			if n == 3 {
				return f[:i]
			}
		}
	}
	return f
}
