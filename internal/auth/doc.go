// Package auth answers two questions for `runbook serve`: who is the
// bearer of a token, and may they do something on a playbook.
//
// # Identities
//
// An Identity is a name, a kind (user, token, oidc, server) and grants:
// each Grant is a role, optionally limited to playbooks whose name
// matches one of its patterns (path.Match syntax: "nks-*"). Identities come
// from three places, checked by an Authenticator in this order:
//
//   - the users and service accounts of the config (auth.users), each
//     with the SHA-256 of its token, and the token named by
//     server.token_secret, which has the admin role;
//   - API tokens created with `runbook token create`, kept in the state
//     store as state.Token records (hash, roles, scopes, revocation);
//   - OIDC bearer tokens (JWTs) of a configured issuer (OIDCVerifier).
//
// # Tokens
//
// Tokens are 256-bit random values (NewToken). Only their SHA-256 is ever
// stored; a presented token is hashed and compared with every known hash
// in constant time. A slow password hash would add latency to every
// request and no safety: the token has 256 bits of entropy.
//
// # Roles and permissions
//
// Roles map to fixed permission sets (RolePermissions): viewer reads,
// operator also starts, cancels, retries and resumes runs, approver also
// answers approvals, admin may do everything, including what is not about
// one playbook (tokens, reload, the audit log). A scoped grant never gives
// a permission that is not about one playbook.
//
// Nothing here logs, and no error or Identity carries a token or a hash.
package auth
