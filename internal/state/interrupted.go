package state

// RunInterrupted is never stored: it is how a run recorded running is
// shown once the process that executed it is known to be gone (killed,
// or its host rebooted), so that nothing executes it until someone
// resumes it. The engine decides it (engine.Interrupted) from the
// owner's lock: the store's own (see Exclusive) or the owner's process.
const RunInterrupted RunStatus = "interrupted"

// Exclusive is implemented by a store that one process holds at a time,
// as a bolt file is (its lock is the owner's lock): while the caller
// holds it, no other process executes any of its runs.
type Exclusive interface {
	Exclusive() bool
}
