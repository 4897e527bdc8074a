package engine

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// runIDs hands out run ID suffixes: per second, a random 24-bit base and
// then a counter, so the IDs of one process in one second never collide
// (until 2^24 of them), and those of processes with different bases
// rarely do.
var runIDs struct {
	sync.Mutex
	sec  int64
	base uint32
	n    uint32
}

// newRunID returns a sortable run ID, unique within the process: UTC time
// to the second and six hex digits, e.g. "20261122T101500-3f9a2c".
func newRunID(now time.Time) string {
	now = now.UTC()
	sec := now.Unix()
	runIDs.Lock()
	if sec != runIDs.sec || runIDs.n == 0 {
		var b [4]byte
		_, _ = rand.Read(b[:])
		runIDs.sec, runIDs.base, runIDs.n = sec, binary.BigEndian.Uint32(b[:]), 0
	}
	suffix := (runIDs.base + runIDs.n) & 0xffffff
	runIDs.n++
	runIDs.Unlock()
	return now.Format("20060102T150405") + "-" + fmt.Sprintf("%06x", suffix)
}

// childRunID is the deterministic ID of the sub-playbook run a step starts,
// so that resuming the parent finds the same child.
func childRunID(parent, step string) string {
	r := strings.NewReplacer("[", ".", "]", "")
	return parent + "." + r.Replace(step)
}

// itemID names one for_each item's record.
func itemID(step string, i int) string {
	return step + "[" + strconv.Itoa(i) + "]"
}
