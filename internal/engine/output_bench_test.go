package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/secrets"
	"github.com/runbook/runbook/internal/state/bolt"
)

// BenchmarkPrintingShellSteps runs a playbook of 20 shell steps that
// print one line each, on a real (fsynced) bbolt file: each attempt that
// printed stores its lines before it ends, one more commit per step.
func BenchmarkPrintingShellSteps(b *testing.B) {
	src := "version: 1\nname: printing\nsteps:\n"
	for i := range 20 {
		src += fmt.Sprintf("  - {id: s%d, uses: shell, with: {command: 'echo step %d'}}\n", i, i)
	}
	benchPlaybook(b, src)
}

// BenchmarkChattyShellStep runs a playbook whose one shell step prints
// 100,000 lines (588,895 bytes), on a real bbolt file: the engine's cost of
// the step's output (cutting lines, redacting, batching, storing) shows
// against the same benchmark of a build without it.
func BenchmarkChattyShellStep(b *testing.B) {
	benchPlaybook(b, "version: 1\nname: chatty\nsteps:\n  - id: chatty\n    uses: shell\n    with: {command: 'seq 1 100000'}\n")
}

func benchPlaybook(b *testing.B, src string) {
	dir := b.TempDir()
	st, err := bolt.Open(filepath.Join(dir, "state.db"), bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	path := filepath.Join(dir, "playbook.yaml")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		b.Fatal(err)
	}
	pb, err := playbook.Load(path, playbook.LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	eng := engine.New(engine.Options{Store: st, Redactor: secrets.NewRedactor(), Environ: []string{"PATH=" + os.Getenv("PATH")}})
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := eng.Run(context.Background(), pb, engine.StartRequest{}); err != nil {
			b.Fatal(err)
		}
	}
}
