// Package api is the contract of runbook's HTTP API, /api/v1: the JSON
// shapes `runbook serve` answers and accepts, which docs/api.md documents
// for people. The server (internal/server) encodes them; the CLI's runs
// verbs (cmd/runbook) decode them; a web UI uses the same types.
//
//   - Run is a run as the API shows it: the stored record (state.Run)
//     without its playbook snapshot, whether this server executes it, its
//     steps (RunStep: state.StepRecord without its checkpoint) and the
//     approval it waits for.
//   - Playbook, Input, Trigger and PlaybookStep describe a loaded playbook.
//   - RunList, EventPage and PlaybookList are the listings; StreamEnd is
//     the data of the last Server-Sent Event of a run's log stream.
//   - RunQuery is the query of the run listing, read (ParseRunQuery) by
//     the server and written (Values) by its clients.
//   - StartRequest, ApproveRequest, RetryRequest and ResumeRequest are
//     request bodies; CancelAnswer, ApproveAnswer, ResumeAnswer,
//     ReloadAnswer and Health the answers that are not a run.
//   - ErrorBody is every error answer, with a fault code.
//
// Caveats: Run and RunStep embed the store's records, so a field added to
// state.Run or state.StepRecord reaches the API too, unless a field of the
// same JSON name here hides it (as Snapshot and Checkpoint do). Answers are
// encoded with their fields in the order declared; changing that order
// changes the bytes clients see, though not the meaning.
//
// The package holds types and RunQuery's encoding only: no HTTP, no I/O.
package api
