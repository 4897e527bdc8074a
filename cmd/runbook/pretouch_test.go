//go:build linux

package main

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// minorFaults is the process's minor page faults so far.
func minorFaults(t *testing.T) int64 {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return ru.Minflt
}

// inOwnProcess reports whether t runs in a process of its own, started
// for it alone with env added: a fresh heap, whose page faults are t's.
// Called in the test's own process, it runs t there, reports its outcome
// and returns false.
func inOwnProcess(t *testing.T, env ...string) bool {
	t.Helper()
	if os.Getenv("RUNBOOK_PRETOUCH_CHILD") != "" {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v")
	cmd.Env = append(append(os.Environ(), "RUNBOOK_PRETOUCH_CHILD=1"), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("%s", out)
	return false
}

// After pretouchHeap, the heap a server's first requests allocate is
// resident already: filling 16 MiB of new objects faults in few of their
// pages. Without it the same allocation faults in about every one (4,096
// pages of 4 KiB). The test runs in a process of its own, whose heap has
// not grown before.
func TestAPretouchedHeapTakesNewObjectsWithoutPageFaults(t *testing.T) {
	if !inOwnProcess(t, "GOGC=400") {
		return
	}
	const size = 16 << 20
	pages := int64(size / os.Getpagesize())
	before := minorFaults(t)
	pretouchHeap(32 << 20)
	touched := minorFaults(t) - before
	if touched < pages {
		t.Fatalf("pretouching 32 MiB faulted in %d pages; want at least %d", touched, pages)
	}
	before = minorFaults(t)
	objects := make([][]byte, 0, size/1024)
	for range size / 1024 {
		b := make([]byte, 1024)
		b[0], b[1023] = 1, 1
		objects = append(objects, b)
	}
	faults := minorFaults(t) - before
	if faults > pages/4 {
		t.Errorf("16 MiB of new objects faulted in %d pages after pretouchHeap; want at most %d", faults, pages/4)
	}
	t.Logf("pretouch: %d faults; 16 MiB of objects after it: %d faults", touched, faults)
	_ = objects[len(objects)-1]
}

// pretouchHeap touches at most half the soft memory limit: its pieces are
// live together, and beyond the limit the collector would run again and
// again while they are.
func TestPretouchStaysWithinHalfTheMemoryLimit(t *testing.T) {
	if !inOwnProcess(t, "GOMEMLIMIT=16MiB") {
		return
	}
	before := minorFaults(t)
	pretouchHeap(64 << 20)
	touched := minorFaults(t) - before
	if limit := int64(8<<20) / int64(os.Getpagesize()); touched < limit/2 || touched > limit*3/2 {
		t.Errorf("pretouchHeap(64 MiB) with GOMEMLIMIT=16MiB faulted in %d pages; want about %d (8 MiB)", touched, limit)
	}
	t.Logf("%d pages", touched)
}
