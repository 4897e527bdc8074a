// Package playtest is `runbook test`: playbook test files (*.test.yaml)
// whose cases run a playbook against the simulators and check what
// happened. docs/testing.md describes the format for users.
//
// # Files
//
// Load reads a test file and the playbook it names and returns a File, or
// every problem at once as playbook.Diagnostics (file:line:col: path:
// message, the playbook's own diagnostics included). Names of steps and
// inputs are checked against the playbook; expressions are compiled.
// Schema is the JSON Schema of the format (schema/playbook-test.schema.json).
//
// # Running a case
//
// RunCase gives each case its own everything: a temporary directory (the
// playbook runs as if it lived there, with the case's files), an
// in-process sim.Server on loopback with every simulator, a sink that
// records the posts a playbook makes to URLs of its own (env.TEST_SINK),
// a bbolt state file, and an engine whose clock is the simulator's (sleeps
// shortened by its speed), whose secrets are the case's only, and whose
// connections all lead to the simulators. The world is seeded through the
// simulators' exported seeding functions; faults go to sim.Faults, the
// cluster simulator's FailNext and the sink. A run starts by hand, on a
// schedule slot, or through the real webhook intake (trigger.Intake), so
// redeliveries are deduplicated as under `runbook serve`. Approvals park
// the run; the case's answer is given with Engine.Approve and the run is
// resumed. A kill cancels the run with engine.ErrSuspend after the named
// step ends, and a new engine over the same state resumes it. A retry is
// Engine.Retry from the named step.
//
// # Expectations
//
// Status, error, outputs and steps apply to the last run of the case;
// runs to each in order. A literal is compared as JSON sees values (3 ==
// 3.0). A string holding ${{ }} is an expression over the run (inputs,
// steps, trigger, run, env, and result: the outputs of the step or run
// being checked); its value is compared the same way, except that a
// boolean against a value that is not one is a condition that must hold.
// Calls are the simulators' journal and the sink's, merged in the order
// they were answered. Every failure carries the position of the
// expectation that did not hold.
//
// # Invariants
//
//   - A case never reaches a real service: a connection without a
//     simulator is refused, and secrets come from the case only.
//   - Cases share nothing but the process: they run in parallel (RunAll),
//     and results are reported in file and case order.
//   - Steps that start programs (shell) inherit the process environment,
//     not the run's env: the CLI points HOME and XDG_* at a temporary
//     directory before running cases.
//   - Time in a case is simulated: waits inside steps that poll in real
//     time (task and EasyMaker waits) still cost their poll interval.
package playtest
