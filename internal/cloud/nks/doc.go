// Package nks is the HTTP client of the container cluster API
// (spec/cluster-api.md, Magnum-derived): clusters, node groups, their
// actions, task history and supported versions; and, in rules.go, the
// spec's request rules as pure functions shared by the steps and the
// simulator.
package nks
