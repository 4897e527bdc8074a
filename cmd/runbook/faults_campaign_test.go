package main

import (
	"testing"
)

// The default suite's fault campaign (issue 27's acceptance, short): the
// soak (faults_soak_test.go) runs the same parts longer. Parts (b) and (c)
// run behind -tags soak only until the faults they inject no longer break
// runs (see faults_soak_test.go).

// (a) Twenty approve/approve and approve/reject races across two
// replicas: no accepted answer is lost, every accepted rejection wins,
// every run ends.
func TestFaultCampaignApprovalRaces(t *testing.T) {
	cp := newCampaign(t)
	f := cp.approvalRaces(20)
	logFigures(t, f, "")
}
