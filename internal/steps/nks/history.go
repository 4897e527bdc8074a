package nks

import (
	"context"
	"net/http"

	"github.com/runbook/runbook/internal/cloud/nks"
	"github.com/runbook/runbook/internal/steps"
)

// Task history reads: nks.task.list and nks.task.get. (nks.task.wait,
// which waits for a task, lives in task.go.)

type listTasksParams struct {
	connParam
	clusterParam
	Type     string `json:"type" desc:"only tasks of this type (CLUSTER_CREATE, NODEGROUP_UPGRADE, ...)"`
	Resource string `json:"resource" desc:"only tasks on this resource UUID"`
	State    string `json:"state" enum:"SUCCESS,FAIL,IN_PROGRESS" desc:"only tasks in this state"`
}

type getTaskParams struct {
	connParam
	clusterParam
	Task string `json:"task" required:"true" desc:"task (event) UUID"`
}

func taskView(t *nks.Task) map[string]any {
	return map[string]any{
		"id": t.ID, "uuid": t.UUID, "cluster_uuid": t.ClusterUUID, "cluster_name": t.ClusterName,
		"resource_uuid": t.ResourceUUID, "resource_name": t.ResourceName, "resource_type": t.ResourceType,
		"type": t.Type, "state": t.State, "contents": t.Contents, "created_at": t.CreatedAt, "updated_at": t.UpdatedAt,
	}
}

const uuidNote = "a cluster name is first resolved to its UUID (GET /v1/clusters/{name}): the history paths take UUIDs"

func init() {
	steps.Register(steps.Define(steps.Def[listTasksParams]{
		Type:    "nks.task.list",
		Summary: "List a cluster's task history, optionally filtered by type, resource and state.",
		Example: map[string]any{"cluster": "prod", "type": "NODEGROUP_UPGRADE", "state": "FAIL"},
		Outputs: []steps.Output{
			{Name: "tasks", Type: "list", Description: "task records as maps: uuid, type, state, contents, resource_uuid, created_at, ..."},
			{Name: "count", Type: "integer", Description: "number of tasks listed"},
		},
		Check: (*listTasksParams).checkRef,
		Plan: func(p *listTasksParams) []steps.PlannedCall {
			call := steps.PlannedCall{Method: http.MethodGet, Path: nks.Path("clusters", p.Cluster, "events")}
			if !uuidRE().MatchString(p.Cluster) {
				call.Note = uuidNote
			}
			return []steps.PlannedCall{call}
		},
		Run: func(ctx context.Context, c *steps.Call, p *listTasksParams) (steps.Outputs, error) {
			return read(ctx, c, p.Connection, func(cl *nks.Client) (steps.Outputs, error) {
				id, err := clusterUUID(ctx, cl, p.Cluster)
				if err != nil {
					return nil, err
				}
				tasks, err := cl.ListTasks(ctx, id)
				if err != nil {
					return nil, err
				}
				out := []any{}
				for i := range tasks {
					t := &tasks[i]
					if (p.Type != "" && t.Type != p.Type) || (p.Resource != "" && t.ResourceUUID != p.Resource) || (p.State != "" && t.State != p.State) {
						continue
					}
					out = append(out, taskView(t))
				}
				return steps.Outputs{"tasks": out, "count": len(out)}, nil
			})
		},
	}))
	steps.Register(steps.Define(steps.Def[getTaskParams]{
		Type:    "nks.task.get",
		Summary: "Read one task history record.",
		Example: map[string]any{"cluster": "prod", "task": "5b1e0f6a-0000-4000-8000-00000000beef"},
		Outputs: []steps.Output{
			{Name: "task", Type: "map", Description: "the task record (see nks.task.list)"},
			{Name: "state", Type: "string", Description: "SUCCESS, FAIL or IN_PROGRESS"},
			{Name: "contents", Type: "string", Description: `progress text ("" when successful)`},
		},
		Check: (*getTaskParams).checkRef,
		Plan: func(p *getTaskParams) []steps.PlannedCall {
			call := steps.PlannedCall{Method: http.MethodGet, Path: nks.Path("clusters", p.Cluster, "events", p.Task)}
			if !uuidRE().MatchString(p.Cluster) {
				call.Note = uuidNote
			}
			return []steps.PlannedCall{call}
		},
		Run: func(ctx context.Context, c *steps.Call, p *getTaskParams) (steps.Outputs, error) {
			return read(ctx, c, p.Connection, func(cl *nks.Client) (steps.Outputs, error) {
				id, err := clusterUUID(ctx, cl, p.Cluster)
				if err != nil {
					return nil, err
				}
				t, err := cl.GetTask(ctx, id, p.Task)
				if err != nil {
					return nil, err
				}
				return steps.Outputs{"task": taskView(t), "state": t.State, "contents": t.Contents}, nil
			})
		},
	}))
}
