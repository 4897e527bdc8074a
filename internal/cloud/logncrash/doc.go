// Package logncrash is the client of Log & Crash Search, where the ML SDK's
// logger sends its lines (spec part (b) "Log sending"; spec/FIDELITY.md):
// POST {collector}/v2/log with the JSON
// {projectName: <appkey>, projectVersion, logVersion: "v2", body, logLevel,
// logSource, logType, host, ...custom fields}.
//
// Client.Send sends one Log. Custom field names are letters, digits and _
// (starting with a letter) and may not collide with the reserved names
// (ValidField, shared with the simulator). The collector answers an
// envelope {"header":{"isSuccessful","resultCode","resultMessage"}}; a
// false isSuccessful is an error even with HTTP 200. 429, 5xx and
// connection failures are retried (internal/cloud/httpcall's loop, the
// policy stated in New): sending is not idempotent, but a duplicate log
// line is an acceptable price for not losing one.
package logncrash
