package ui

import (
	"context"
	"fmt"

	"github.com/runbook/runbook/internal/api"
)

// maxRunOutput is the most lines of step output a run page reads (runbook
// runs logs RUN STEP prints all of them).
const maxRunOutput = 10000

// printedLine is a line a step printed, as the run page shows it under
// the step (escaped by the template).
type printedLine struct {
	Stream, Text, Clock string
}

// loadOutput reads what the run's steps printed, by step ID.
func (u *UI) loadOutput(ctx context.Context, s *session, esc string, d *runData) error {
	var page api.OutputPage
	if err := u.get(ctx, s, fmt.Sprintf("/api/v1/runs/%s/output?limit=%d", esc, maxRunOutput), &page); err != nil {
		return err
	}
	d.OutputTruncated = len(page.Lines) == maxRunOutput
	if n := len(page.Lines); n > 0 {
		d.OutputAfter = page.Lines[n-1].Seq
	}
	d.printed = map[string][]printedLine{}
	for _, l := range page.Lines {
		d.printed[l.Step] = append(d.printed[l.Step], printedLine{Stream: l.Stream, Text: l.Text, Clock: l.Time.UTC().Format("15:04:05.000")})
	}
	return nil
}
