// Package ui is runbook's web UI: server-rendered HTML pages (html/template)
// with small progressive scripts, embedded in the binary and served by
// `runbook serve` at /.
//
// # Over the API, in process
//
// Every page is built from /api/v1 answers, and every action is an /api/v1
// call: the UI calls the server's API handler in process (Options.API)
// as the signed-in session (its Source, in the request context), so the
// API's checks (token, role, input validation, "the run keeps waiting") are the UI's, and
// nothing the UI shows is reachable only through it. Live updates are the
// API's Server-Sent Events streams, passed through: a run's
// (/runs/{id}/live) for its page, and the stream of run changes (/live,
// GET /api/v1/changes) for the runs list and the playbooks page.
//
// # Sessions
//
// /login takes an API token, or signs in with the OIDC issuer
// (Options.OIDC: authorization code, PKCE, state, nonce). A session keeps
// no secret: it is stored (Options.Sessions, the state store, else
// memory) under the SHA-256 of a random session ID, the browser holds the
// ID in an HttpOnly, SameSite=Strict cookie, and it holds the source of
// its identity (a token's SHA-256, or the OIDC name and roles), asked of
// Options.Recheck each minute and after a restart. Every form carries the
// session's CSRF token (derived from the session ID, never stored) and
// every POST also checks Origin / Sec-Fetch-Site. What a
// user may do comes from Options.Identify as a Permissions value; a page
// offers only the actions it allows (the API enforces them regardless).
//
// # Assets
//
// templates/ and static/ are the sources and what is served (go:embed);
// there is no build step. Responses carry a Content-Security-Policy
// without inline script or style, so every script is static/app.js and
// geometry (timeline bars, graph) is SVG attributes, not style attributes.
package ui
