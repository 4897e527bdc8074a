// Package logncrash holds the logncrash.send step: one log line to Log &
// Crash Search, as the ML SDK's logger sends it (spec part (b) "Log
// sending"). DESIGN places it in internal/steps/easymaker; it lives apart so
// that the two families are built and tested independently. The connection
// (default "logncrash") gives base_url and appkey.
package logncrash
