// Package core holds the built-in step types that talk to no cloud API:
// log, set, sleep, fail, http.request, shell, approval and playbook. Each
// type lives in its own file and registers itself from init(); import
// internal/steps/all to get every family.
//
// Conventions shared by every type here:
//   - Run returns the context's error, unwrapped, when it is cancelled
//     (code Cancelled); step-level timeouts are reported with code Timeout.
//   - Failures users can act on are *fault.Error with a code the retry
//     policy understands (http.request classifies status codes, shell uses
//     Failed for a disallowed exit code).
//   - Waits (sleep, approval) compute their deadline once, persist it with
//     Host.Checkpoint and resume the same deadline from Call.Resume.
package core
