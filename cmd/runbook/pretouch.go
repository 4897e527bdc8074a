package main

import (
	"os"
	"runtime"
	"runtime/debug"
)

// pretouchHeap makes about n bytes of heap resident before the server
// answers: it allocates them in 1 MiB pieces, writes a byte to each of
// their pages, lets them go and collects them (runtime.GC). The freed
// pages stay mapped and resident, and the runtime gives them to the
// objects the first requests allocate.
//
// Without it a new server's heap grows into fresh memory while it answers
// its first requests, and the first touch of every page is a page fault
// in the kernel. On the virtual machine of docs/performance.md a fault
// costs about 12 µs, and the answers of a new server's first half second
// took three to five times as long as later ones ("A new server at speed
// from its first request"). It is what the JVM's AlwaysPreTouch does for
// a Java heap. The cost is the time to touch them at start (about 0.1 s
// for 32 MiB there) and the resident memory: the runtime returns unused
// pages to the system only after collections, so an idle server keeps
// them for a while.
//
// The pieces are live together (freed ones would be reused, not fresh),
// so n is held to half the soft memory limit: beyond the limit the
// collector would run again and again while they are.
func pretouchHeap(n int64) {
	const piece = 1 << 20
	n = min(n, debug.SetMemoryLimit(-1)/2)
	if n < piece {
		return
	}
	page := os.Getpagesize()
	pieces := make([][]byte, 0, n/piece)
	for range n / piece {
		b := make([]byte, piece)
		for i := 0; i < len(b); i += page {
			b[i] = 1
		}
		pieces = append(pieces, b)
	}
	runtime.KeepAlive(pieces) // the last use: the collection below frees them
	runtime.GC()
}
