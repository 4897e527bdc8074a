// Package fault is the coded error every layer of runbook shares: the
// cloud clients classify an API's answer with it, steps return it, the
// engine decides retries by it, and the CLI and HTTP API turn it into an
// exit code and a status.
//
// It sits below everything else in the tree and imports nothing of
// runbook's, so the lowest layer (internal/cloud) never depends on the
// step contract (internal/steps) only to say what went wrong.
//
//   - Code names a class of failure; one table maps each code to whether
//     the default policy retries it, its CLI exit code and its HTTP status.
//   - Error carries a code, a message, structured Data readable by
//     expressions as steps.<id>.error.data, and the wrapped cause.
//   - CodeForHTTPStatus classifies an unexpected HTTP status.
//   - Problem is one validation finding about a step's params, positioned
//     by a JSON path below `with`.
//   - ErrSuspended marks a run parked until an approval is answered: not a
//     failure, so it has no code.
package fault
