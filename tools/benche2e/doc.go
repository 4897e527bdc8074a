// Package benche2e measures runbook end to end on the machine it runs on:
// real `runbook serve` processes on loopback over a fresh bbolt file, over
// one PostgreSQL database with one replica and with three, driven by the
// simulator's webhook sender, and `runbook run` of a chain of shell steps
// against the fork floor measured in the same run. `make bench-e2e` runs it
// and prints one table; docs/performance.md publishes what it printed.
//
// For each store it reports:
//
//   - deliveries/s end to end: signed webhook deliveries sent by 32
//     senders, each starting a run of a one-step `log` playbook, divided by
//     the time until every run they started has finished; and the
//     acknowledgement latency p50/p99 the senders saw (with three replicas,
//     the worst replica's);
//   - step dispatch latency p50/p99: runs of two http.request steps
//     started at a paced rate, both calling a receiver of the harness on
//     loopback, which notes when each call arrives: from step a's call to
//     step b's is a's answer read, a's end and b's start on record, and b's
//     request sent;
//   - failover (three replicas only): a replica running a run is killed
//     with SIGKILL; the time until another replica writes the run's next
//     event (its takeover), and to the run's end, with server.lease at its
//     default (10 s; -lease);
//   - the shell chain: `runbook run` of N sequential `shell: true` steps
//     against `bash` forking `/bin/sh -c true` N times, in turn, and the
//     ratio of their medians.
//
// Before each PostgreSQL store's loads, the harness leaves -wal-warm MiB
// (384 by default) of WAL segment files ready on the server (WarmWAL), as
// a server in service has after its first checkpoint: on a new cluster
// each 16 MiB of WAL first creates and zero-fills its file, and every
// commit waits for it. -wal-warm 0 measures a new cluster as it is.
//
// Everything listens on 127.0.0.1 only (the PostgreSQL server is
// internal/state/postgres/pgtest's throwaway one, or RUNBOOK_TEST_POSTGRES),
// every wait has a deadline, and every process it starts is stopped when it
// returns. The measuring test is behind the benche2e build tag: the default
// suite runs only a short smoke test of the bbolt part.
package benche2e
