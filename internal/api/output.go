package api

import "github.com/runbook/runbook/internal/state"

// OutputPage answers GET /api/v1/runs/{id}/output: a page of the steps'
// output lines (of one step with ?step=), oldest first, and the run's
// status. Page with after = the last line's seq.
type OutputPage struct {
	Lines  []state.OutputLine `json:"lines"`
	Status state.RunStatus    `json:"status"`
}

// OutputEvent is the SSE event type of a step output line in the stream
// of GET /api/v1/runs/{id}/logs?output=true; its data is a
// state.OutputLine.
const OutputEvent = "output"
