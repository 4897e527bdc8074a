package main

import (
	"context"
	"fmt"

	"github.com/runbook/runbook/internal/state"
)

// outputCopyPage is how many output lines one read and one append of
// copyOutput move.
const outputCopyPage = 5000

// copyOutput copies the steps' output of every run (state.StepOutput),
// run by run in pages, after the records: the lines keep their order and
// numbers (a destination run starts without output).
func copyOutput(ctx context.Context, src, dst state.Store) (int, error) {
	runs, err := src.ListRuns(ctx, state.RunFilter{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range runs {
		var after uint64
		for {
			lines, err := src.Output(ctx, r.ID, state.OutputFilter{After: after, Limit: outputCopyPage})
			if err != nil {
				return n, fmt.Errorf("output of run %s: %w", r.ID, err)
			}
			if len(lines) == 0 {
				break
			}
			after = lines[len(lines)-1].Seq
			if err := dst.AppendOutput(ctx, r.ID, lines); err != nil {
				return n, fmt.Errorf("output of run %s: %w", r.ID, err)
			}
			n += len(lines)
		}
	}
	return n, nil
}
