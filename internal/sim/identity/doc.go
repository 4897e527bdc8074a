// Package identity simulates the identity endpoint that issues the tokens
// the cluster API (and object storage) accept: POST /v2.0/tokens with a
// tenant ID, a user name and an API password, answered in the Keystone v2
// shape (access.token.id, access.token.expires, tenant, service catalog).
//
// The catalog lists the simulated services running on the same server, one
// endpoint each in region KR1, with the path public clients expect there
// (catalogEntries): container-infra is versioned (…/nks/v1) as Magnum's
// clients need, network and image are unversioned, object-store is the
// Swift account URL.
//
// Tokens live for Lifetime of simulated time (default 12h), so advancing the
// simulator's clock expires them and a client's refresh path can be
// rehearsed. Wrong credentials answer 401 with the Keystone error body.
//
// The token store is shared with the other simulated services of the same
// server through For(env): the nks service asks For(env).Valid(token). A
// store exists per sim.Env and disappears with it.
//
// Admin routes (under the service prefix): POST /_admin/lifetime
// {"lifetime":"30m"} and POST /_admin/revoke (every issued token becomes
// invalid).
package identity
