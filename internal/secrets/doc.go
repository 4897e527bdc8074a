// Package secrets resolves secret names to values and keeps those values
// out of everything runbook writes.
//
// # Resolution
//
// A Source resolves a name from the environment (RUNBOOK_SECRET_<name>
// first), then from a secrets file (YAML, JSON or dotenv map of name to
// string), then from the environment variable <name>. Values never come
// from the playbook. A secrets file that group or others can read is used,
// with a warning (Source.Warnings).
//
// # Redaction
//
// A Redactor holds the values resolved so far and masks them as "***" in
// strings (String), bytes (Bytes), JSON-like values (Value, keys included)
// and slog records (Handler). Beyond the raw value it masks its common
// encodings: base64 (standard and URL-safe, padded or not, and embedded at
// any offset in longer base64 text), URL query and path escaping, JSON and
// Go string escaping, and hex.
//
// Invariants and caveats:
//   - With nothing registered, every method returns its input unchanged
//     and allocates nothing.
//   - Values shorter than MinMaskLen (3 bytes) are registered but never
//     masked: masking them everywhere would wreck output.
//   - Masking is textual. A value transformed in other ways (hashed,
//     split, compressed, re-cased) is not recognized: values derived from
//     secrets must be registered with Add by whoever derives them.
//   - A Redactor is safe for concurrent use; Add rebuilds an immutable
//     matcher, so readers never lock.
package secrets
