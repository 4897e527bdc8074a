// Package config loads runbook.yaml, the file `runbook serve` reads: the
// playbook directory, the state and secrets files, server settings,
// webhook routes, default connection settings and whether schedules fire.
//
// # API
//
// Load reads a file, Parse a byte slice; both return a *Config with every
// default filled in and every relative path made absolute against the
// config file's directory. Default returns the config used when there is
// no file. SecretRefs lists the secret names the config references;
// ResolveConnections replaces `${{ secrets.NAME }}` in connection settings.
//
// # Invariants
//
//   - Every field is optional; the defaults work against `runbook serve
//     --sim`: playbooks from ./playbooks, listen on 127.0.0.1:8088, the
//     API token in the secret RUNBOOK_API_TOKEN, schedules on.
//   - The config never holds a secret value, only secret names:
//     server.token_secret and webhooks.routes.*.secret(s) are names, and a
//     connection setting is either a literal or exactly
//     `${{ secrets.NAME }}` (no other expression is allowed).
//   - State is "" unless the file sets it: the caller then applies the
//     CLI rule (--state, $RUNBOOK_STATE, the XDG state directory).
//
// # Diagnostics
//
// An invalid file returns playbook.Diagnostics: every problem, sorted by
// position, one per line as `file:line:col: path: message`, with a
// "did you mean" hint for unknown keys and connection names. A file that
// cannot be read is an ordinary error; a missing one wraps fs.ErrNotExist,
// so a caller can fall back to Default when the default path is absent.
//
// Durations are Go durations with an optional leading number of days
// (30s, 1h30m, 7d), as in playbooks. Sizes are a byte count or a whole
// number with a unit: B, KiB, MiB (1024-based) or KB, MB (1000-based).
package config
