package engine

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// newRunID returns a sortable, unique run ID: UTC time to the second and
// six random hex digits, e.g. "20261122T101500-3f9a2c".
func newRunID(now time.Time) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return now.UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b[:])
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
