package core

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/runbook/runbook/internal/steps"
)

type sleepParams struct {
	Duration steps.Duration `json:"duration" required:"true" max:"720h" desc:"how long to wait, like 30s or 1h30m"`
}

// sleepCheckpoint is what sleep persists: the moment it ends.
type sleepCheckpoint struct {
	Until time.Time `json:"until"`
}

// checkpointMin is the shortest sleep worth a checkpoint write; a process
// that dies during a shorter one simply sleeps it again.
const checkpointMin = time.Second

func init() {
	steps.Register(steps.Define(steps.Def[sleepParams]{
		Type:    "sleep",
		Summary: "Wait for a duration; a resumed run waits only for what is left.",
		Example: map[string]any{"duration": "30s"},
		Outputs: []steps.Output{{Name: "slept", Type: "string", Description: "the duration waited, like 30s"}},
		Run:     runSleep,
	}))
}

func runSleep(ctx context.Context, c *steps.Call, p *sleepParams) (steps.Outputs, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d := p.Duration.Std()
	now := c.Now()
	until := now.Add(d)
	var cp sleepCheckpoint
	if c.Resume != nil && json.Unmarshal(c.Resume, &cp) == nil && !cp.Until.IsZero() {
		until = cp.Until
	} else if d >= checkpointMin {
		b, _ := json.Marshal(sleepCheckpoint{Until: until})
		if err := c.Host.Checkpoint(ctx, b); err != nil {
			return nil, fmt.Errorf("sleep: checkpoint: %w", err)
		}
	}
	// A host that parks runs (runbook serve) suspends a long sleep here:
	// the step runs again at until, from the checkpoint, and ends then.
	if err := steps.WaitUntil(ctx, c, until, "sleep"); err != nil {
		return nil, err
	}
	return steps.Outputs{"slept": p.Duration.String()}, nil
}
