//go:build !soak

package main

// approvalRaces is how many runs TestAnswersGivenAtOnceOnTwoReplicasAreAllCounted
// answers approve/approve, and as many approve/reject (100 each with -tags soak).
const approvalRaces = 20
