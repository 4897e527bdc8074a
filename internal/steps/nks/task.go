package nks

import (
	"context"
	"fmt"
	"slices"

	"github.com/runbook/runbook/internal/cloud/nks"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

// taskWaitParams are the params of nks.task.wait.
type taskWaitParams struct {
	Connection string         `json:"connection" desc:"connection name (default nks)"`
	Cluster    string         `json:"cluster" required:"true" maxlen:"255" desc:"cluster name or UUID whose task history records the task"`
	Resource   string         `json:"resource" maxlen:"255" desc:"UUID of the cluster or node group the mutating call answered (a node group name is resolved); default: the cluster"`
	EventType  string         `json:"event_type" required:"true" enum:"CLUSTER_CREATE,CLUSTER_DELETE,CLUSTER_HANDOVER,CLUSTER_CNI_UPDATE,NODEGROUP_CREATE,NODEGROUP_DELETE,CLUSTER_RESIZE,NODEGROUP_UPDATE_FLAVOR,NODEGROUP_UPGRADE,NODEGROUP_USERSCRIPT_UPDATE,NODEGROUP_SET_CLUSTER_AUTOSCALER,NODEGROUP_NODE_ACTION_NODE_START,NODEGROUP_NODE_ACTION_NODE_STOP" desc:"task type to wait for (a resize's CLUSTER_RESIZE is recorded on the node group)"`
	AfterTask  string         `json:"after_task" maxlen:"64" desc:"UUID of a task known to be older: only a task of the type created after it is awaited"`
	Known      []string       `json:"known" desc:"UUIDs of tasks that existed before the request: they are never awaited"`
	Timeout    steps.Duration `json:"timeout" default:"2h" min:"1s" max:"72h" desc:"how long to wait for the task to end"`
}

// taskWaitCheckpoint is what nks.task.wait persists: the wait (its task
// once found, its deadline) and the attempt that set the deadline.
type taskWaitCheckpoint struct {
	Attempt int        `json:"attempt"`
	Wait    *waitState `json:"wait"`
}

func init() {
	steps.Register(steps.Define(steps.Def[taskWaitParams]{
		Type: "nks.task.wait",
		Summary: "Wait for a cluster API task (the newest of its type on the resource, newer than the known ones) " +
			"to reach SUCCESS; fail with its contents on FAIL. A resumed run keeps waiting on the same task.",
		Example: map[string]any{"cluster": "prod", "event_type": "CLUSTER_CREATE", "timeout": "10m"},
		Outputs: []steps.Output{
			{Name: "task_uuid", Type: "string", Description: "UUID of the task waited on"},
			{Name: "status", Type: "string", Description: "the task's final state: SUCCESS"},
			{Name: "contents", Type: "string", Description: "the task's contents (empty when successful)"},
			{Name: "type", Type: "string", Description: "the task type"},
		},
		Plan: func(p *taskWaitParams) []steps.PlannedCall {
			return []steps.PlannedCall{
				{Method: "GET", Path: nks.Path("clusters", p.Cluster), Note: "resolves the cluster's UUID"},
				{Method: "GET", Path: nks.Path("clusters", "{cluster uuid}", "events"),
					Note: "polled with backoff until the " + p.EventType + " task ends (then by its UUID)"},
			}
		},
		Run: runTaskWait,
	}))
}

func runTaskWait(ctx context.Context, c *steps.Call, p *taskWaitParams) (steps.Outputs, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cl, err := clientFor(c, p.Connection)
	if err != nil {
		return nil, err
	}
	var cp taskWaitCheckpoint
	if _, err := c.LoadCheckpoint(&cp); err != nil {
		return nil, err
	}
	save := func() error { return c.SaveCheckpoint(ctx, cp) }
	switch {
	case cp.Wait == nil:
		ws, err := newTaskWait(ctx, cl, p)
		if err != nil {
			return nil, err
		}
		ws.Deadline = c.Now().Add(p.Timeout.Std())
		cp = taskWaitCheckpoint{Attempt: c.Attempt, Wait: ws}
		if err := save(); err != nil {
			return nil, err
		}
	case cp.Attempt != c.Attempt:
		// A new attempt (retry after a timeout) gets a new deadline but
		// keeps the task; a resumed process keeps both.
		cp.Attempt, cp.Wait.Deadline = c.Attempt, c.Now().Add(p.Timeout.Std())
		if err := save(); err != nil {
			return nil, err
		}
	}
	task, err := waitTask(ctx, c, cl, cp.Wait, save)
	if err != nil {
		return nil, err
	}
	return steps.Outputs{"task_uuid": task.UUID, "status": task.State, "contents": task.Contents, "type": task.Type}, nil
}

// newTaskWait resolves the cluster and resource to UUIDs and notes which
// tasks of the type are older than the one awaited: the known ones, and
// with after_task every task of the type on the resource created no later
// than it. With neither, the newest task of the type on the resource is
// awaited (the usual case right after a mutating step).
func newTaskWait(ctx context.Context, cl *nks.Client, p *taskWaitParams) (*waitState, error) {
	cluster, err := cl.GetCluster(ctx, p.Cluster)
	if err != nil {
		return nil, fmt.Errorf("read cluster %s: %w", p.Cluster, err)
	}
	ws := &waitState{ClusterUUID: cluster.UUID, ResourceUUID: cluster.UUID, EventType: p.EventType,
		Known: append([]string{}, p.Known...)}
	switch r := p.Resource; {
	case r == "" || r == cluster.UUID || r == cluster.Name:
	case uuidRE().MatchString(r):
		ws.ResourceUUID = r
	case r == nks.MasterNodeGroup:
		// The master group cannot be read (403): match its tasks by type.
		ws.ResourceUUID = ""
	default:
		g, err := cl.GetNodeGroup(ctx, cluster.UUID, r)
		if err != nil {
			return nil, fmt.Errorf("read node group %s of %s: %w", r, p.Cluster, err)
		}
		ws.ResourceUUID = g.UUID
	}
	if p.AfterTask == "" {
		return ws, nil
	}
	tasks, err := cl.ListTasks(ctx, cluster.UUID)
	if err != nil {
		return nil, fmt.Errorf("read task history of %s: %w", p.Cluster, err)
	}
	i := slices.IndexFunc(tasks, func(t nks.Task) bool { return t.UUID == p.AfterTask })
	if i < 0 {
		return nil, fault.Errorf(fault.NotFound, "after_task %s is not in the task history of cluster %s", p.AfterTask, p.Cluster)
	}
	floor, at := tasks[i], tasks[i].Created()
	for _, t := range tasks {
		if tc := t.Created(); tc.Before(at) || (tc.Equal(at) && t.ID <= floor.ID) {
			ws.Known = append(ws.Known, t.UUID)
		}
	}
	return ws, nil
}
