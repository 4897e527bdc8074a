// Package easymaker holds the machine-learning steps (easymaker.*): the
// operations of the ML SDK of spec/webhook-and-ml-sdk.md part (b), one
// file per resource (experiment, training, tuning, model, endpoint and
// stage, batch inference) plus easymaker.list for the SDK CLI's listings.
//
// # Params
//
// Params are named like the SDK's parameters (snake_case) with the same
// defaults, plus `connection` (default "easymaker"). Every per-field
// range of the spec's tables is a struct tag, so the JSON Schema carries
// it (a test holds the tags to the limits of internal/cloud/easymaker).
// The rules that relate several params (nodes x trials, storage for
// object storage inputs, the algorithm choice, a tuning's objective,
// hyperparameter specs, distinct resource paths) are the exported rules
// of internal/cloud/easymaker, which the simulator applies too; the
// Check funcs call them. Literal values are refused when the playbook
// loads (with their position) and computed ones by Decode before any
// call; a value computed inside a literal list element (a dataUri, a
// hyperparameter bound) is skipped at load time, where Check learns its
// path from the dynamic set, and judged then. Image, instance and
// algorithm names are resolved to IDs through the client's Resolve* calls.
//
// # Waits
//
// Creates and runs have `wait` (default true), `poll_interval` (default
// 10s like the SDK, at least 1s) and `timeout` (runbook's own, default
// 24h; never beyond timeout_hours where the resource has one). A wait
// re-reads the resource until COMPLETE, ACTIVE or ENABLED and fails at
// once (code failed) when the status contains FAIL or STOP, with the
// status and the resource's reason. An endpoint create also waits for its
// default stage to be ACTIVE.
//
// # Exactly once
//
// Creates are Mutating. Before the create request the step checkpoints
// "calling"; after the answer, "called" with the resource ID and the
// wait's deadline. A resumed step that finds "called" does not create
// again: it goes on waiting on the same ID until the same deadline. One
// that finds "calling" (the request may have reached the service) is
// reconciled: the resource of the same name is adopted (found through the
// client's list and an exact-name filter), else the step runs again. An
// experiment create adopts an existing experiment of the same name, as
// the SDK does. Deletes treat not_found as done.
package easymaker
