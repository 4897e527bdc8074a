package nks

import (
	"context"
	"fmt"
	"time"

	"github.com/runbook/runbook/internal/cloud/nks"
	"github.com/runbook/runbook/internal/steps"
)

// mutation is one mutating cluster API call whose task can be waited on.
type mutation struct {
	Connection  string
	EventType   string        // the nks.Event* task type the call records
	Wait        bool          // wait for the task to reach SUCCESS
	WaitTimeout time.Duration // 0: defaultWaitTimeout
	// ClusterBefore names the cluster whose task history exists before the
	// call ("" for a cluster create): its tasks of EventType are noted so
	// the wait picks the task this call started, not an older one.
	ClusterBefore string
	// Call performs the request. It runs at most once per attempt that
	// reaches it; on resume after a recorded call it is skipped.
	Call func(ctx context.Context, cl *nks.Client) (mutationResult, error)
}

// mutationResult is what a mutating call answered.
type mutationResult struct {
	ClusterUUID  string        `json:"cluster_uuid"`  // the cluster whose task history records the task
	ResourceUUID string        `json:"resource_uuid"` // the resource the task is recorded on ("" = any)
	Outputs      steps.Outputs `json:"outputs"`
}

const defaultWaitTimeout = 2 * time.Hour

// mutationCheckpoint is what a mutating step persists: where it is, what
// the call answered, and what it waits on, so a resumed step neither calls
// twice after a recorded answer nor loses the task it was waiting for.
type mutationCheckpoint struct {
	Phase  string          `json:"phase"` // calling, called
	Known  []string        `json:"known"` // kept even when empty: nil means "not read yet"
	Result *mutationResult `json:"result,omitempty"`
	Wait   *waitState      `json:"wait,omitempty"`
}

const (
	phaseCalling = "calling"
	phaseCalled  = "called"
)

// runMutation checkpoints, calls, checkpoints the answer, and with Wait
// waits for the task the call started; the outputs then gain task_uuid
// and task_status.
func runMutation(ctx context.Context, c *steps.Call, m mutation) (steps.Outputs, error) {
	cl, err := clientFor(c, m.Connection)
	if err != nil {
		return nil, err
	}
	var cp mutationCheckpoint
	if _, err := c.LoadCheckpoint(&cp); err != nil {
		return nil, err
	}
	save := func() error { return c.SaveCheckpoint(ctx, cp) }
	if cp.Phase != phaseCalled {
		if m.Wait && m.ClusterBefore != "" && cp.Known == nil {
			known, err := knownTasks(ctx, cl, m.ClusterBefore, m.EventType)
			if err != nil {
				return nil, err
			}
			cp.Known = known
		}
		cp.Phase = phaseCalling
		if err := save(); err != nil {
			return nil, err
		}
		res, err := m.Call(ctx, cl)
		if err != nil {
			return nil, err
		}
		cp.Phase, cp.Result = phaseCalled, &res
		if err := save(); err != nil {
			return nil, err
		}
	}
	out := steps.Outputs{}
	for k, v := range cp.Result.Outputs {
		out[k] = v
	}
	if !m.Wait {
		return out, nil
	}
	if cp.Wait == nil {
		timeout := m.WaitTimeout
		if timeout <= 0 {
			timeout = defaultWaitTimeout
		}
		cp.Wait = &waitState{
			ClusterUUID: cp.Result.ClusterUUID, ResourceUUID: cp.Result.ResourceUUID,
			EventType: m.EventType, Known: cp.Known, Deadline: c.Now().Add(timeout),
		}
		if err := save(); err != nil {
			return nil, err
		}
	}
	task, err := waitTask(ctx, c, cl, cp.Wait, save)
	if err != nil {
		return nil, err
	}
	out["task_uuid"], out["task_status"] = task.UUID, task.State
	return out, nil
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
