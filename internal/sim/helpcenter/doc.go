// Package helpcenter simulates the help-center notice read API
// (spec/helpcenter-notice-api.md, spec/FIDELITY.md "Help-center notices")
// and registers it with the simulator framework as "helpcenter".
//
// One help center (service ID "runbook-demo" by default) holds 7 headings
// and 12 tags named in ko, en, ja, zh and th, and notices generated
// deterministically from Env.Seed (300 by default): maintenance windows,
// feature releases, price changes, incident reports, announcements, events
// and policy changes, written in each language, a few pinned, some tagged,
// some with attachments (PDF, CSV, PNG, text), display dates spread over
// the 180 days before the simulated clock's start and a few dated today.
//
// # Fidelity
//
// Field types follow the spec literally, quirks included: displayDt in the
// dotted yyyy.MM.dd form of the samples, updatedDt as epoch milliseconds,
// tagStr comma-separated text and absent when a notice has no tag, isNew
// the string "true" or "false" (displayDt is today, by the simulated clock
// in Asia/Seoul, at answer time), attachmentYn "Y" or "N". The list checks
// common authentication (FIDELITY) against the wall clock (clients sign
// with theirs): a blank Authorization, a missing, non-numeric or expired
// X-TC-Timestamp (more than 5 minutes away) and a wrong signature answer
// result code 400. The signed path is the one the real host sees,
// /{serviceId}/api/v2/notice/list.json, without the simulator's /helpcenter
// mount prefix, so a client signing as the spec says works unchanged.
// Unknown service IDs and notices answer 404 ("no data"), unknown
// attachments 9005 ("no related data"); invalid parameters (page, pageSize
// outside 1..200, sort) answer 400. Error envelopes carry the result code
// as the HTTP status too (9005: 404).
//
// When no sort is given the list is ordered isTop desc, displayDt desc,
// updatedDt desc, as the spec says; every order ends with noticeId desc so
// that pages never overlap.
//
// # Admin
//
// Under /helpcenter/_admin/ (neither journaled nor faulted): POST notices
// adds a notice (NewNotice as JSON) and answers its detail; POST reset
// {"notices": N} regenerates N notices; GET stats. The same operations are
// methods of *Service (AddNotice, Reset, Count) for tests in process. A
// Service is safe for concurrent use.
package helpcenter
