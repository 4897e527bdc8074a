package easymaker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/runbook/runbook/internal/cloud/easymaker"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

// createCheckpoint is what a create persists: where it is, the ID the
// service gave, the answer's outputs, and the wait's deadline, so a
// resumed step neither creates twice after a recorded answer nor loses
// the resource it was waiting on.
type createCheckpoint struct {
	Phase    string        `json:"phase"` // calling, called
	ID       string        `json:"id,omitempty"`
	Outputs  steps.Outputs `json:"outputs,omitempty"`
	Deadline time.Time     `json:"deadline,omitzero"`
	Adopted  bool          `json:"adopted,omitempty"`
}

const (
	phaseCalling = "calling"
	phaseCalled  = "called"
)

// creation is one create or run step.
type creation struct {
	what         string // "training": names the resource in messages
	conn         string
	wait         waitParams
	timeoutHours int // the resource's own limit (0: none)
	// create sends the request (after resolving names) and returns the new
	// ID and the outputs the answer gives. It runs at most once per attempt
	// that reaches it; after a recorded answer it is skipped.
	create func(ctx context.Context, cl *easymaker.Client) (string, snapshot, error)
	// read reads the resource while waiting.
	read reader
	// adopted is set by reconcile: the resource exists already; no request
	// is sent.
	adopted *adoption
}

// adoption is a resource found by name.
type adoption struct {
	id   string
	snap snapshot
}

// resource is one kind of resource as the create steps see it: its ID and
// its snapshot. Its methods turn the client's answers into what a
// creation and a reconcile need.
type resource[T any] struct {
	id   func(*T) string
	snap func(*T) snapshot
}

// reader reads the resource by ID with get (a method of the client).
func (k resource[T]) reader(get func(*easymaker.Client, context.Context, string) (*T, error)) reader {
	return func(ctx context.Context, cl *easymaker.Client, id string) (snapshot, error) {
		x, err := get(cl, ctx, id)
		if err != nil {
			return snapshot{}, err
		}
		return k.snap(x), nil
	}
}

// created is the answer to a create request, as creation.create returns
// it.
func (k resource[T]) created(x *T, err error) (string, snapshot, error) {
	if err != nil {
		return "", snapshot{}, err
	}
	return k.id(x), k.snap(x), nil
}

// adopt is the adoption of a resource found by name (nil: none found).
func (k resource[T]) adopt(x *T, err error) (*adoption, error) {
	if err != nil || x == nil {
		return nil, err
	}
	return &adoption{id: k.id(x), snap: k.snap(x)}, nil
}

// runCreate checkpoints, creates, checkpoints the answer and, with wait,
// waits on the resource. Outputs gain "adopted" (true when an existing
// resource of the name was taken instead of creating one).
func runCreate(ctx context.Context, c *steps.Call, k creation) (steps.Outputs, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", c.StepID, err)
	}
	cl, err := clientFor(c, k.conn)
	if err != nil {
		return nil, err
	}
	var cp createCheckpoint
	if _, err := c.LoadCheckpoint(&cp); err != nil {
		return nil, err
	}
	save := func() error { return c.SaveCheckpoint(context.WithoutCancel(ctx), cp) }
	if cp.Phase != phaseCalled || cp.ID == "" {
		var id string
		var snap snapshot
		if k.adopted != nil {
			id, snap, cp.Adopted = k.adopted.id, k.adopted.snap, true
		} else {
			cp.Phase = phaseCalling
			if err := c.SaveCheckpoint(ctx, cp); err != nil {
				return nil, err
			}
			if id, snap, err = k.create(ctx, cl); err != nil {
				return nil, err
			}
			if id == "" {
				return nil, fault.Errorf(fault.Internal, "%s: the service answered the create without an ID", k.what)
			}
		}
		cp.Phase, cp.ID, cp.Outputs = phaseCalled, id, snap.Outputs
		if k.wait.Wait {
			cp.Deadline = c.Now().Add(waitTimeout(k.wait, k.timeoutHours))
		}
		if err := save(); err != nil {
			return nil, err
		}
	}
	out := steps.Outputs{}
	for key, v := range cp.Outputs {
		out[key] = v
	}
	out["adopted"] = cp.Adopted
	if !k.wait.Wait {
		return out, nil
	}
	if cp.Deadline.IsZero() {
		// Called without wait before; waiting now starts its own deadline.
		cp.Deadline = c.Now().Add(waitTimeout(k.wait, k.timeoutHours))
		if err := save(); err != nil {
			return nil, err
		}
	}
	snap, err := waitFor(ctx, c, cl, k.what, cp.ID, k.read, k.wait.PollInterval.Std(), cp.Deadline)
	if err != nil {
		return nil, err
	}
	for key, v := range snap.Outputs {
		out[key] = v
	}
	return out, nil
}

// createMayHaveBeenSent reports whether the step's checkpoint says the
// create request may have been sent without its answer being recorded.
func createMayHaveBeenSent(c *steps.Call) bool {
	var cp createCheckpoint
	return len(c.Resume) > 0 && json.Unmarshal(c.Resume, &cp) == nil && cp.Phase == phaseCalling
}

// reconcileBy builds the Reconcile hook of a create: when the request may
// have been sent, find looks for the resource by the name being created;
// one found is adopted (and, with wait, waited on as the step would
// have); none lets the engine run the step again. k builds the step's
// creation from its params.
func reconcileBy[P any](k func(c *steps.Call, p *P) creation,
	find func(ctx context.Context, cl *easymaker.Client, p *P) (*adoption, error),
) func(ctx context.Context, c *steps.Call, p *P, _ steps.Intent) (steps.Outputs, bool, error) {
	return func(ctx context.Context, c *steps.Call, p *P, _ steps.Intent) (steps.Outputs, bool, error) {
		if !createMayHaveBeenSent(c) {
			return nil, false, nil
		}
		kc := k(c, p)
		cl, err := clientFor(c, kc.conn)
		if err != nil {
			return nil, false, err
		}
		a, err := find(ctx, cl, p)
		if err != nil {
			return nil, false, fmt.Errorf("look for the %s the interrupted attempt may have created: %w", kc.what, err)
		}
		if a == nil {
			return nil, false, nil
		}
		c.Log.Info("adopting the resource created before the interruption", "resource", kc.what, "id", a.id)
		kc.adopted = a
		out, err := runCreate(ctx, c, kc)
		return out, err == nil, err
	}
}

// deleteResult runs a delete: not_found counts as done (deleted false).
func deleteResult(ctx context.Context, c *steps.Call, conn, what, id string, del func(cl *easymaker.Client, ctx context.Context, id string) error) (steps.Outputs, error) {
	return read(ctx, c, conn, func(cl *easymaker.Client) (steps.Outputs, error) {
		err := del(cl, ctx, id)
		switch {
		case err == nil:
			return steps.Outputs{"id": id, "deleted": true}, nil
		case fault.CodeOf(err) == fault.NotFound:
			c.Log.Info("already gone", "resource", what, "id", id)
			return steps.Outputs{"id": id, "deleted": false}, nil
		}
		return nil, fmt.Errorf("delete %s %s: %w", what, id, err)
	})
}

// deleteOutputs document every delete step.
var deleteOutputs = []steps.Output{
	{Name: "id", Type: "string", Description: "the ID asked for"},
	{Name: "deleted", Type: "boolean", Description: "true when this step deleted it; false when it was already gone (not_found counts as done)"},
}

// adoptedOutput documents the output every create adds.
var adoptedOutput = steps.Output{Name: "adopted", Type: "boolean",
	Description: "true when an existing resource of the name was adopted instead of creating another (resume after an interruption; experiments of an existing name)"}

// calledAlready reports whether a resumed step's create was recorded.
func calledAlready(c *steps.Call) bool {
	var cp createCheckpoint
	return len(c.Resume) > 0 && json.Unmarshal(c.Resume, &cp) == nil && cp.Phase == phaseCalled && cp.ID != ""
}

// waitNote says in a plan what the step waits for.
// timeoutHours bounds the wait as at run time (0: none).
func waitNote(w waitParams, timeoutHours int, until string) string {
	if !w.Wait {
		return "returns the ID at once (wait: false)"
	}
	return "then re-reads it every " + w.PollInterval.String() + " until " + until +
		" (timeout " + steps.Duration(waitTimeout(w, timeoutHours)).String() + ")"
}
