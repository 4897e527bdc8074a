// Package agent is runbook's remote execution: `runbook agent` processes
// that dial out to a runbook serve and execute the step attempts placed
// on them by runs_on (docs/agents.md).
//
//   - Dispatcher is the server's side (engine.Agents): it holds the agents'
//     sessions, places each attempt on a live agent whose labels match and
//     that has a free slot (the least loaded, then the one that waited
//     longest for a turn), and relays the lines, host calls and result
//     the agent sends to the attempt's steps.Call.
//   - Worker is the agent's side: register, long-poll, execute with this
//     binary's step registry, send lines (batched) and the result.
//
// Invariants: an assignment is a lease on its attempt, held by one agent
// session and renewed by that session's every request. A session that
// makes no request for the lease loses it, and with it every assignment:
// the attempt then follows the crash-resume rules (Dispatcher.Execute),
// and anything the lost session sends afterwards is refused (ErrLost).
//
// Caveats: the sessions and assignments live in the memory of the server
// that placed them; an agent polls that server. A server that stops ends
// its sessions (the agents register again) and its runs resume by the
// crash-resume rules wherever they are taken up.
package agent
