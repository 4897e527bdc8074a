package runner

import "github.com/runbook/runbook/internal/trigger"

var _ trigger.PayloadRedactor = (*Host)(nil)

// RedactPayload implements trigger.PayloadRedactor: a webhook delivery's
// body, stored once for its runs, is redacted as their records are (the
// secret inputs of the runs it starts are registered by then).
func (r *Host) RedactPayload(v any) any { return r.eng.RedactValue(v) }
