package nks

import (
	"context"
	"fmt"
	"time"

	"github.com/runbook/runbook/internal/cloud/nks"
	"github.com/runbook/runbook/internal/steps"
)

// A mutating step sends one request and, with wait, waits for the task the
// request started. Its checkpoint says how far it got, so that a resumed
// step never sends the request again once its answer was recorded, and
// keeps waiting on the same task until the same deadline.

type waitParams struct {
	Wait        bool           `json:"wait" default:"false" desc:"wait for the task the call starts to reach SUCCESS (a FAIL task fails the step with its contents)"`
	WaitTimeout steps.Duration `json:"wait_timeout" default:"2h" min:"1s" max:"72h" desc:"how long wait waits for the task"`
}

const defaultWaitTimeout = 2 * time.Hour

// waitOutputs document the task outputs of a step that takes waitParams.
var waitOutputs = []steps.Output{
	{Name: "task_uuid", Type: "string", Description: `the task waited on ("" without wait)`},
	{Name: "task_status", Type: "string", Description: `SUCCESS when waited ("" without wait)`},
}

func withWaitOutputs(outs ...steps.Output) []steps.Output { return append(outs, waitOutputs...) }

// taskOutputs sets the outputs of waitOutputs: the task waited on, or ""
// for both without wait (task nil).
func taskOutputs(out steps.Outputs, task *nks.Task) steps.Outputs {
	out["task_uuid"], out["task_status"] = "", ""
	if task != nil {
		out["task_uuid"], out["task_status"] = task.UUID, task.State
	}
	return out
}

// op is the mutating request of one step run.
type op struct {
	conn    string
	cluster string // the cluster acted on ("" for a create)
	event   string // the nks.Event* task type the request records
	// wait is the step's wait params; nil for a step that cannot wait,
	// whose outputs then have no task outputs.
	wait *waitParams
	// call sends the request; clusterUUID is the resolved cluster ("" for
	// a create).
	call func(ctx context.Context, cl *nks.Client, clusterUUID string) (mutationResult, error)
}

func (o op) waits() bool { return o.wait != nil && o.wait.Wait }

// mutationResult is what a mutating call answered.
type mutationResult struct {
	ClusterUUID  string        `json:"cluster_uuid"`  // the cluster whose task history records the task
	ResourceUUID string        `json:"resource_uuid"` // the resource the task is recorded on ("" = any)
	Outputs      steps.Outputs `json:"outputs"`
}

// mutationCheckpoint is what a mutating step persists: where it is, what
// the call answered, and what it waits on.
type mutationCheckpoint struct {
	Phase string `json:"phase"` // calling, called
	// Known lists the cluster's tasks of the op's type that existed before
	// the request, so the wait picks the task this request started. Kept
	// even when empty: nil means "not read yet".
	Known  []string        `json:"known"`
	Result *mutationResult `json:"result,omitempty"`
	Wait   *waitState      `json:"wait,omitempty"`
}

const (
	phaseCalling = "calling"
	phaseCalled  = "called"
)

// mutation is one run of a mutating step: its client, built once, and
// its checkpoint, read once.
type mutation struct {
	c  *steps.Call
	cl *nks.Client
	cp mutationCheckpoint
}

// startMutation reads the step's checkpoint (none on a first run) and
// builds the client for the connection conn.
func startMutation(c *steps.Call, conn string) (*mutation, error) {
	m := &mutation{c: c}
	if _, err := c.LoadCheckpoint(&m.cp); err != nil {
		return nil, err
	}
	cl, err := clientFor(c, conn)
	if err != nil {
		return nil, err
	}
	m.cl = cl
	return m, nil
}

// called reports whether the request's answer was recorded.
func (m *mutation) called() bool { return m.cp.Phase == phaseCalled }

// inDoubt reports whether the request may have been sent without its
// answer being recorded.
func (m *mutation) inDoubt() bool { return m.cp.Phase == phaseCalling }

func (m *mutation) save(ctx context.Context) error { return m.c.SaveCheckpoint(ctx, m.cp) }

// mutate runs the step's request o.
func mutate(ctx context.Context, c *steps.Call, o op) (steps.Outputs, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m, err := startMutation(c, o.conn)
	if err != nil {
		return nil, err
	}
	return m.run(ctx, o)
}

// run sends o's request unless its answer was recorded, and with wait
// waits for the task it started.
func (m *mutation) run(ctx context.Context, o op) (steps.Outputs, error) {
	if !m.called() {
		if err := m.send(ctx, o); err != nil {
			return nil, err
		}
	}
	out := steps.Outputs{}
	for k, v := range m.cp.Result.Outputs {
		out[k] = v
	}
	if o.wait == nil {
		return out, nil
	}
	if !o.wait.Wait {
		return taskOutputs(out, nil), nil
	}
	task, err := m.await(ctx, o)
	if err != nil {
		return nil, err
	}
	return taskOutputs(out, task), nil
}

// send resolves the cluster's UUID, with wait notes the cluster's tasks of
// the op's type, then checkpoints, sends the request and checkpoints its
// answer.
func (m *mutation) send(ctx context.Context, o op) error {
	id := ""
	if o.cluster != "" {
		var err error
		if id, err = clusterUUID(ctx, m.cl, o.cluster); err != nil {
			return err
		}
	}
	if o.waits() && id != "" && m.cp.Known == nil {
		known, err := knownTasks(ctx, m.cl, id, o.event)
		if err != nil {
			return err
		}
		m.cp.Known = known
	}
	m.cp.Phase = phaseCalling
	if err := m.save(ctx); err != nil {
		return err
	}
	res, err := o.call(ctx, m.cl, id)
	if err != nil {
		return err
	}
	m.cp.Phase, m.cp.Result = phaseCalled, &res
	return m.save(ctx)
}

// await waits for the task the recorded request started.
func (m *mutation) await(ctx context.Context, o op) (*nks.Task, error) {
	if m.cp.Wait == nil {
		timeout := o.wait.WaitTimeout.Std()
		if timeout <= 0 {
			timeout = defaultWaitTimeout
		}
		m.cp.Wait = &waitState{
			ClusterUUID: m.cp.Result.ClusterUUID, ResourceUUID: m.cp.Result.ResourceUUID,
			EventType: o.event, Known: m.cp.Known, Deadline: m.c.Now().Add(timeout),
		}
		if err := m.save(ctx); err != nil {
			return nil, err
		}
	}
	return waitTask(ctx, m.c, m.cl, m.cp.Wait, func() error { return m.save(ctx) })
}

// knownTasks lists the UUIDs of a cluster's existing tasks of one type.
func knownTasks(ctx context.Context, cl *nks.Client, cluster, eventType string) ([]string, error) {
	tasks, err := cl.ListTasks(ctx, cluster)
	if err != nil {
		return nil, fmt.Errorf("read task history of %s before the call: %w", cluster, err)
	}
	known := []string{}
	for _, t := range tasks {
		if t.Type == eventType {
			known = append(known, t.UUID)
		}
	}
	return known, nil
}
