package main

import (
	"testing"
	"time"
)

// The default suite's fault campaign (issue 27's acceptance, short): the
// soak (faults_soak_test.go) runs the same parts longer.

// (a) Twenty approve/approve and approve/reject races across two
// replicas: no accepted answer is lost, every accepted rejection wins,
// every run ends.
func TestFaultCampaignApprovalRaces(t *testing.T) {
	cp := newCampaign(t)
	f := cp.approvalRaces(20)
	logFigures(t, f, "")
}

// (b) Database faults alone under load from 30 senders: every
// acknowledged hook's run ends within 30 s of the database answering
// again, none fails, no two runs of a key overlap, no step runs twice.
func TestFaultCampaignDatabaseFaults(t *testing.T) {
	cp := newCampaign(t)
	f := cp.underFaults(loadPlan{senders: 30, deliveries: 70, keys: 35, rounds: 1, pace: 80 * time.Millisecond})
	logFigures(t, f, " -tags soak")
}

// (c) The same with replicas killed (kill -9) and stopped (SIGSTOP past
// the lease) between the database faults: a step executing on a lost
// replica may run again once, nothing else changes.
func TestFaultCampaignReplicaFaults(t *testing.T) {
	cp := newCampaign(t)
	f := cp.underFaults(loadPlan{senders: 30, deliveries: 70, keys: 35, rounds: 1, pace: 150 * time.Millisecond, replicas: true})
	logFigures(t, f, " -tags soak")
}
