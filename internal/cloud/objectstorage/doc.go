// Package objectstorage is the client of the object storage behind obs://
// URIs (obs://{host}/v1/AUTH_{tenant}/{container}/{object}): OpenStack
// Swift, authenticated with an identity token sent as X-Auth-Token
// (spec/FIDELITY.md, "ML service").
//
// Parse and ParseURI read the URIs (at most 255 characters, the spec's path
// limit; no . or .. segments). An object part that is empty or ends in "/"
// names a prefix.
//
// Client (New, ConfigFrom over a connection map with base_url,
// identity_url, tenant_id, username, password or token) transfers files:
// Upload/UploadFrom send a file or a directory tree, Download/DownloadTo
// save an object or every object below a prefix. The *From/*To forms work
// below an *os.Root, so nothing is read or written outside it (symbolic
// links included). base_url, when set, replaces the URI's host, which is
// how a simulator serves URIs written for the real host. tenant_id may be
// left out: the token is then requested for each URI's own tenant.
//
// Invariants: files stream (never held whole in memory); each upload sends
// its MD5 as ETag and each download checks it; existing objects or files
// are refused before anything moves unless Overwrite (an upload finding
// the same bytes already stored is not a conflict, so re-running one is
// safe); every call is idempotent, so 429, 5xx and connection errors are
// retried with backoff by internal/cloud/httpcall's loop (the policy is
// Client.policy), a download cut short or failing its ETag check
// included, and a 401 replaces the token once. Errors are
// *fault.Error: 404 not_found, 401/403 unauthorized, 409 conflict, 5xx and
// ETag mismatches unavailable, bad paths and limits invalid.
package objectstorage
