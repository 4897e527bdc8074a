package playtest

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// BenchmarkCaseOverhead measures what one case costs beyond its playbook:
// the case directory, the simulators, the sink, the state file, the
// engine, a one-step run, the expectations and the cleanup
// (testdata/hello.test.yaml's first case: two set steps and a log).
func BenchmarkCaseOverhead(b *testing.B) {
	f, err := Load("testdata/hello.test.yaml")
	if err != nil {
		b.Fatal(err)
	}
	c := f.Cases[0]
	o := Options{Dir: b.TempDir()}
	b.ReportAllocs()
	for b.Loop() {
		if r := RunCase(context.Background(), f, c, o); !r.Passed {
			b.Fatal(r.Failures)
		}
	}
}

// BenchmarkShippedSuite runs every case of playbooks/tests/*.test.yaml, in
// parallel as `runbook test playbooks/` does (-p default), once per
// iteration: the figure the issue bounds (10 s on 2 cores).
func BenchmarkShippedSuite(b *testing.B) {
	// The suppression file of sms-unsubscribe lives in the process's
	// XDG_STATE_HOME (as under runbook test): a fresh one per iteration.
	b.Setenv("HOME", b.TempDir())
	b.Setenv("XDG_STATE_HOME", b.TempDir())
	paths, err := filepath.Glob("../../playbooks/tests/*" + Suffix)
	if err != nil || len(paths) == 0 {
		b.Fatal("no shipped test files", err)
	}
	files, invalid := LoadAll(paths)
	if len(invalid) > 0 {
		b.Fatal(invalid)
	}
	jobs := Selected(files, nil)
	for b.Loop() {
		if err := os.Setenv("XDG_STATE_HOME", b.TempDir()); err != nil {
			b.Fatal(err)
		}
		for _, r := range RunAll(context.Background(), jobs, 0, Options{Dir: b.TempDir()}, nil) {
			if !r.Passed {
				b.Fatal(r.Name(), r.Failures)
			}
		}
	}
	b.ReportMetric(float64(len(jobs)), "cases")
	b.ReportMetric(float64(runtime.GOMAXPROCS(0)), "procs")
}
