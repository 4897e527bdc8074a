// Package sim serves faithful simulators of the cloud APIs runbook drives,
// over real HTTP on loopback: the product's rehearsal environment (`runbook
// sim`, `runbook run --sim`) and the tests' peer.
//
// Each API is a Service in its own sub-package (sim/helpcenter, sim/nks,
// ...), registered from init(); sim/all blank-imports them. Start mounts
// every registered service under its own prefix on one listener
// (http://127.0.0.1:PORT/<name>/...) and gives each:
//
//   - a Clock that can run faster than real time (Options.Speed) and be
//     advanced by tests, so asynchronous operations finish on cue;
//   - a Journal of every call received (method, path, query, body, status),
//     which tests read to prove ordering and exactly-once behaviour;
//   - Faults: latency, 429, 5xx on chosen calls, read by the middleware
//     before a service sees the request (services add domain faults, such as
//     tasks that end in FAIL, through their own admin routes).
//   - request bodies up to MaxRequestBody (32 MiB), held in memory; a
//     larger one is answered 413 and never reaches the service.
//
// Admin routes live under /_sim/ (journal, faults, clock) and under each
// service's /<name>/_admin/ prefix. The server binds 127.0.0.1 unless told
// otherwise.
package sim
