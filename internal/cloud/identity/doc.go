// Package identity obtains the tokens that the cluster API and object
// storage accept in X-Auth-Token.
//
// # Main types
//
// Source hands out a token: Token(ctx) and Invalidate(token). It is built
// from a Config (New) or from a runbook connection map (ConfigFrom:
// identity_url, tenant_id, username, password, token).
//
// With a static token (Config.Token) the Source returns it as is and never
// calls the identity service. Otherwise it sends
//
//	POST {identity_url}/v2.0/tokens
//	{"auth":{"tenantId":...,"passwordCredentials":{"username":...,"password":...}}}
//
// and reads access.token.id and access.token.expires from the answer
// (spec/FIDELITY.md, "Cluster API"; the default identity URL is
// DefaultURL).
//
// # Invariants
//
//   - A token is reused until shortly before it expires: 5 minutes, or a
//     tenth of its lifetime when that is shorter.
//   - Concurrent callers share one refresh; each waits for it under its own
//     context, and the refresh itself is not cancelled when the caller that
//     started it goes away.
//   - Invalidate(t) after a 401 drops t if it is still the cached token, so
//     the next Token refreshes exactly once however many callers saw the 401.
//   - Failures are not cached: the next Token tries again.
//   - Errors are *fault.Error: refused credentials are unauthorized, 429 is
//     throttled, 5xx and network errors are unavailable, other answers are
//     invalid. Neither the password nor a token appears in an error.
package identity
