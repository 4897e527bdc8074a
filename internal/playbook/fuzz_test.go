package playbook

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzLoad checks that Parse never panics, answers in bounded time, and
// returns either a playbook or positioned Diagnostics. The testdata
// playbooks are the seeds (they run in every go test).
func FuzzLoad(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/*.yaml")
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		start := time.Now()
		pb, err := Parse("fuzz.yaml", src, LoadOptions{MaxBytes: 64 << 10})
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("Parse took %s", d)
		}
		if err == nil {
			if pb == nil || pb.Hash == "" || len(pb.Steps) == 0 {
				t.Fatalf("loaded playbook is incomplete: %+v", pb)
			}
			return
		}
		if pb != nil {
			t.Fatal("a playbook returned with an error")
		}
		var ds Diagnostics
		if !errors.As(err, &ds) || len(ds) == 0 {
			t.Fatalf("error is %T %v, want Diagnostics", err, err)
		}
		for _, d := range ds {
			if d.Pos.Line < 1 || d.Pos.Col < 1 || d.Message == "" {
				t.Fatalf("bad diagnostic %+v", d)
			}
		}
	})
}
