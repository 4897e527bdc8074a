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
// A secret registered with Add is also masked in the forms a program
// commonly turns it into, since shell output and HTTP bodies are text no
// expression produced: the value in any ASCII letter case (`tr a-z A-Z`),
// reversed (`rev`), its SHA-1, SHA-256 and MD5 digests in hex (either
// case) and base64, of the value with and without a trailing newline
// (`echo "$S" | sha256sum`), and any fragment of FragmentLen (8) bytes or
// more of it or of its reversal, in any letter case (`cut -c1-12`). A
// value registered with AddDerived (an expression's result computed from
// a secret, see internal/engine) gets the encodings only.
//
// Matching is one pass over the text that tests every fourth byte against
// a bitset of hashed 4-byte keys and compares exactly only on a hit:
// about 0.6 µs per KB of clean output and 1.2 µs per KB of output holding
// secrets, with 20 secrets registered (BenchmarkRedactKB).
//
// Invariants and caveats:
//   - With nothing registered, every method returns its input unchanged
//     and allocates nothing.
//   - Values shorter than MinMaskLen (3 bytes) are registered but never
//     masked: masking them everywhere would wreck output.
//   - Masking is textual. A value transformed in other ways (a digest
//     other than those above, split into pieces shorter than 8 bytes,
//     compressed, encrypted) is not recognized: values derived from
//     secrets must be registered with AddDerived by whoever derives them.
//   - A fragment rule masks ordinary text that shares 8 bytes with a
//     secret (a secret URL's "https://" included). Fragments and letter
//     cases are ASCII-only.
//   - A Redactor is safe for concurrent use; Add rebuilds an immutable
//     matcher, so readers never lock.
package secrets
