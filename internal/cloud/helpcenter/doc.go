// Package helpcenter is the HTTP client of the help-center notice read API
// (spec/helpcenter-notice-api.md): headings, tags, the notice list with its
// filters, sort and paging, notice detail and attachments.
//
// # Main types
//
// Client is built from a Config (New) or from a runbook connection map
// (ConfigFrom: base_url, service_id, org_id, security_key, language). Its
// methods are Headings, Tags, Notices (one page), All (every page, as an
// iterator), Notice (detail) and Attachment (a file, opened or downloaded).
//
// # Authentication
//
// The notice list needs "common authentication" (spec/FIDELITY.md):
// Authorization = Base64(HMAC-SHA256(security key, orgID + request path +
// query values ordered by parameter name joined with "&" + timestamp)) and
// X-TC-Timestamp = epoch milliseconds. Sign computes it. The request path
// signed is the API's own (/{serviceId}/api/v2/...), without the path of
// the base URL: the real host serves at the root of its domain, and the
// simulator mounted at /helpcenter checks what the real host would. The client sends
// both headers on every call when a security key is configured: the other
// operations ignore them.
//
// # Errors
//
// Every error a call returns is a *fault.Error whose Code classifies it
// (invalid, unauthorized, not_found, throttled, unavailable). When the API
// answered, the chain also holds an *APIError with the HTTP status and the
// envelope's resultCode and resultMessage: errors.As finds both. Parameters
// are validated before any request is sent.
//
// # Retries
//
// Every operation is a GET and is retried (internal/cloud/httpcall's loop,
// the policy stated in New) on 429, 5xx (HTTP status, or the resultCode of
// a 200 envelope) and network errors: Config.MaxAttempts attempts in
// all (default 4), exponential backoff with jitter, Retry-After
// honoured, the wait cut short by ctx. Config.Sleep replaces the wait in
// tests.
//
// # Quirks tolerated
//
// The spec's stated types and its samples disagree; decoding accepts both:
// displayDt as yyyyMMddHHmmss or yyyy.MM.dd (DisplayTime, parsed in
// Config.Location, default Asia/Seoul, raw text kept); tagStr absent, text
// or number (TagList); isNew, isTop and attachmentYn as booleans, "true" /
// "false" or "Y" / "N" (Flag); updatedDt as a number or numeric string of
// epoch milliseconds (EpochMillis).
package helpcenter
