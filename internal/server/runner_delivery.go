package server

import "github.com/runbook/runbook/internal/trigger"

var _ trigger.PayloadRedactor = (*runner)(nil)

// RedactPayload implements trigger.PayloadRedactor: a webhook delivery's
// body, stored once for its runs, is redacted as their records are (the
// secret inputs of the runs it starts are registered by then).
func (r *runner) RedactPayload(v any) any { return r.s.eng.RedactValue(v) }
