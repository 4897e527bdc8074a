//go:build soak

package main

import (
	"testing"
	"time"
)

// TestReplicasSoak is the long version of TestReplicasKilledUnderLoad:
// 32 senders, 2000 deliveries, 20 approvals across replicas and 10 kills.
// Run it with: go test -tags soak -run TestReplicasSoak ./cmd/runbook
func TestReplicasSoak(t *testing.T) {
	delays := crashReplicas(t, 32, 2000, 20, 10, 10*time.Millisecond)
	logDelays(t, delays)
}
