// Package agent is runbook's remote execution: `runbook agent` processes
// that dial out to any replica of runbook serve and execute the step
// attempts placed on them by runs_on (docs/agents.md).
//
//   - Dispatcher is a replica's side (engine.Agents): it answers any
//     agent's requests, places the attempts of the runs this replica
//     executes on live agents whose labels match and that have a free
//     slot within their limits per playbook (the least loaded, then the
//     one that waited longest for a turn), and relays the lines, host
//     calls and result the agent sends to the attempt's steps.Call.
//   - Worker is the agent's side: register, long-poll, execute with this
//     binary's step registry, send lines (batched) and the result.
//
// The sessions and assignments live in the store (state.AgentStore), so
// that an agent may reach any replica: placement is one transaction
// ordered against the others by a lock (capacity and limits hold across
// replicas); the replica the agent polls hands over what the owner
// placed; lines and host calls that reach another replica go to the owner
// as mail through the store; the replicas wake each other with
// NoticeAgent (in-process alone, on bbolt). A replica that takes a run over finds the step's assignment and
// waits for it.
//
// Secrets: an attempt's params hold resolved secrets and connection
// credentials, so nothing is stored in clear. An agent registers with an
// ephemeral X25519 key and the owner seals the assignment to it; what an
// agent sends through another replica (lines, host calls, the result) is
// sealed to the owner's ephemeral key, and a host call's answer to the
// relaying replica's (nacl box). A replica's key dies with it: what was
// sealed for it is dropped (lines) or asked for again (host calls go to
// the new owner, a result is sent again from the agent's memory).
//
// Invariants: an assignment is a lease on its attempt, held by one agent
// session and renewed by that session's polls, wherever they land. A
// session that makes no request for the lease loses it, and with it
// every assignment: the attempt then follows the crash-resume rules
// (Dispatcher.Execute), and anything the lost session sends afterwards is
// refused (ErrLost).
package agent
