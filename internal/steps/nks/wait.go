package nks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/runbook/runbook/internal/cloud/nks"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

// waitState is what a wait persists: the task it looks for (type,
// resource, tasks that existed before the call), the task once found, and
// its deadline, so a resumed run keeps waiting on the same task until the
// same deadline.
type waitState struct {
	ClusterUUID  string    `json:"cluster_uuid"`
	ResourceUUID string    `json:"resource_uuid,omitempty"`
	EventType    string    `json:"event_type"`
	Known        []string  `json:"known,omitempty"`
	TaskUUID     string    `json:"task_uuid,omitempty"`
	Deadline     time.Time `json:"deadline"`
	// Interval is the wait before the next poll, kept when the run is
	// parked between two polls so the polls keep slowing down.
	Interval time.Duration `json:"interval,omitempty"`
}

// pollMin and pollMax bound the interval between two reads of a task
// (real time); the interval grows by half each poll.
var (
	pollMin = 250 * time.Millisecond
	pollMax = 15 * time.Second
)

// waitTask polls the task history until the awaited task ends. SUCCESS
// returns the task; FAIL fails with the task's contents; the deadline
// fails with a timeout. save persists ws when the task is found.
func waitTask(ctx context.Context, c *steps.Call, cl *nks.Client, ws *waitState, save func() error) (*nks.Task, error) {
	interval := min(max(ws.Interval, pollMin), pollMax)
	for {
		task, err := findTask(ctx, cl, ws)
		switch {
		case err != nil && ws.EventType == nks.EventClusterDelete && fault.CodeOf(err) == fault.NotFound:
			// A deleted cluster takes its task history with it: gone is done.
			return &nks.Task{UUID: ws.TaskUUID, Type: ws.EventType, State: nks.TaskSuccess}, nil
		case err != nil:
			return nil, err
		case task != nil && ws.TaskUUID == "":
			ws.TaskUUID = task.UUID
			if err := save(); err != nil {
				return nil, err
			}
		}
		if task != nil {
			switch task.State {
			case nks.TaskSuccess:
				return task, nil
			case nks.TaskFail:
				contents := task.Contents
				if contents == "" {
					contents = "no details given"
				}
				return nil, &fault.Error{Code: fault.Failed,
					Message: fmt.Sprintf("%s task %s failed: %s", task.Type, task.UUID, contents),
					Data:    map[string]any{"task_uuid": task.UUID, "contents": task.Contents, "type": task.Type}}
			}
		}
		if !ws.Deadline.IsZero() && !c.Now().Before(ws.Deadline) {
			what := ws.EventType + " task"
			if ws.TaskUUID != "" {
				what += " " + ws.TaskUUID
			}
			return nil, &fault.Error{Code: fault.Timeout, Message: fmt.Sprintf("%s did not finish before %s", what, ws.Deadline.UTC().Format(time.RFC3339)),
				Data: map[string]any{"task_uuid": ws.TaskUUID}}
		}
		// A host that parks runs (runbook serve) parks the run until the
		// next poll once polls are far enough apart: the step runs again
		// then, from ws.
		err = steps.WaitUntil(ctx, c, c.Now().Add(interval), "next poll of the "+ws.EventType+" task")
		if errors.Is(err, fault.ErrSuspended) {
			ws.Interval = min(interval+interval/2, pollMax)
			if serr := save(); serr != nil {
				return nil, serr
			}
			return nil, err
		}
		if err != nil {
			return nil, err
		}
		interval = min(interval+interval/2, pollMax)
	}
}

// findTask returns the awaited task: by UUID once known, else the newest
// task of the type on the resource that was not in the history before the
// call (nil while it has not appeared yet).
func findTask(ctx context.Context, cl *nks.Client, ws *waitState) (*nks.Task, error) {
	if ws.TaskUUID != "" {
		t, err := cl.GetTask(ctx, ws.ClusterUUID, ws.TaskUUID)
		if err != nil {
			return nil, fmt.Errorf("read task %s: %w", ws.TaskUUID, err)
		}
		return t, nil
	}
	tasks, err := cl.ListTasks(ctx, ws.ClusterUUID)
	if err != nil {
		return nil, fmt.Errorf("read task history of cluster %s: %w", ws.ClusterUUID, err)
	}
	var fresh []nks.Task
	for _, t := range tasks {
		if !slices.Contains(ws.Known, t.UUID) {
			fresh = append(fresh, t)
		}
	}
	return nks.NewestTask(fresh, ws.ResourceUUID, ws.EventType, time.Time{}), nil
}
