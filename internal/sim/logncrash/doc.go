// Package logncrash simulates the Log & Crash Search collector:
// POST /v2/log with one log object or an array of them. Every log is
// validated as the client builds it (projectName an accepted appkey,
// logVersion "v2", a non-empty body, a known logLevel, custom field names
// per internal/cloud/logncrash.ValidField) and recorded; the answer is the
// collector's envelope {"header":{"isSuccessful":true,"resultCode":0,
// "resultMessage":"Success."}}, or isSuccessful false with a resultCode and
// HTTP 400 for a bad body or appkey.
//
// Tests read what was received through Logs (in-process) or
// GET /_admin/logs (DELETE clears). Connection gives base_url and the
// accepted appkey.
package logncrash
