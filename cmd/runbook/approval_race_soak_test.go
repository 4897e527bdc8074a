//go:build soak

package main

// approvalRaces is how many runs TestAnswersGivenAtOnceOnTwoReplicasAreAllCounted
// answers approve/approve, and as many approve/reject.
const approvalRaces = 100
