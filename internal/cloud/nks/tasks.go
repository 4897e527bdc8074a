package nks

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// Task states.
const (
	TaskSuccess    = "SUCCESS"
	TaskFail       = "FAIL"
	TaskInProgress = "IN_PROGRESS"
)

// Task types (Events in the spec), by the operation that produces each.
const (
	EventClusterCreate          = "CLUSTER_CREATE"
	EventClusterDelete          = "CLUSTER_DELETE"
	EventClusterHandover        = "CLUSTER_HANDOVER"
	EventClusterCNIUpdate       = "CLUSTER_CNI_UPDATE"
	EventNodeGroupCreate        = "NODEGROUP_CREATE"
	EventNodeGroupDelete        = "NODEGROUP_DELETE"
	EventClusterResize          = "CLUSTER_RESIZE"
	EventNodeGroupUpdateFlavor  = "NODEGROUP_UPDATE_FLAVOR"
	EventNodeGroupUpgrade       = "NODEGROUP_UPGRADE"
	EventNodeGroupUserScript    = "NODEGROUP_USERSCRIPT_UPDATE"
	EventNodeGroupSetAutoscaler = "NODEGROUP_SET_CLUSTER_AUTOSCALER"
	EventNodeGroupNodeStart     = "NODEGROUP_NODE_ACTION_NODE_START"
	EventNodeGroupNodeStop      = "NODEGROUP_NODE_ACTION_NODE_STOP"
	ResourceTypeCluster         = "cluster"
	ResourceTypeNodeGroup       = "nodegroup"
)

// Task is a task history record (an event).
type Task struct {
	ID          int    `json:"id"`
	UUID        string `json:"uuid"`
	ProjectID   string `json:"project_id"`
	ClusterUUID string `json:"cluster_uuid"`
	ClusterName string `json:"cluster_name"`
	// ResourceUUID is the target: the cluster or node group UUID that the
	// mutating call answered.
	ResourceUUID string `json:"resource_uuid"`
	// ResourceName is read from resource_name, or from resource.name (as
	// the spec's single-record table writes it).
	ResourceName string `json:"resource_name"`
	ResourceType string `json:"resource_type"`
	Type         string `json:"type"`
	State        string `json:"state"`
	// Contents is the task's progress text; "" (null) when successful.
	Contents  string `json:"contents"`
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
}

// UnmarshalJSON reads a record, tolerating a null contents and the
// resource.name spelling.
func (t *Task) UnmarshalJSON(b []byte) error {
	type plain Task
	var v struct {
		plain
		Contents *string `json:"contents"`
		Resource *struct {
			Name string `json:"name"`
		} `json:"resource"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*t = Task(v.plain)
	if v.Contents != nil {
		t.Contents = *v.Contents
	}
	if t.ResourceName == "" && v.Resource != nil {
		t.ResourceName = v.Resource.Name
	}
	return nil
}

// Done reports whether the task reached SUCCESS or FAIL.
func (t *Task) Done() bool { return t.State == TaskSuccess || t.State == TaskFail }

// Created returns CreatedAt as a time (zero when unreadable).
func (t *Task) Created() time.Time {
	tm, _ := ParseTime(t.CreatedAt)
	return tm
}

// Supports is the answer of GET /v1/supports.
type Supports struct {
	// SupportedK8s maps a version name to true when it is valid/supported.
	SupportedK8s       map[string]bool `json:"supported_k8s"`
	SupportedEventType struct {
		// Maps from task type to its description.
		ClusterEvents   map[string]string `json:"cluster_events"`
		NodeGroupEvents map[string]string `json:"nodegroup_events"`
	} `json:"supported_event_type"`
}

// Latest returns the newest supported version ("" when none).
func (s *Supports) Latest() string { return LatestSupportedVersion(s.SupportedK8s) }

// ListTasks lists a cluster's task history
// (GET /v1/clusters/{CLUSTER_UUID}/events). The path takes the cluster's
// UUID, not its name.
func (c *Client) ListTasks(ctx context.Context, clusterUUID string) ([]Task, error) {
	if err := checkID("cluster UUID", clusterUUID); err != nil {
		return nil, err
	}
	var out struct {
		Events []Task `json:"events"`
	}
	if err := c.do(ctx, http.MethodGet, Path("clusters", clusterUUID, "events"), nil, &out); err != nil {
		return nil, err
	}
	return out.Events, nil
}

// GetTask reads one task history record
// (GET /v1/clusters/{CLUSTER_UUID}/events/{EVENT_UUID}).
func (c *Client) GetTask(ctx context.Context, clusterUUID, eventUUID string) (*Task, error) {
	if err := checkID("cluster UUID", clusterUUID); err != nil {
		return nil, err
	}
	if err := checkID("event UUID", eventUUID); err != nil {
		return nil, err
	}
	var out Task
	if err := c.do(ctx, http.MethodGet, Path("clusters", clusterUUID, "events", eventUUID), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Supports lists the supported orchestrator versions and event types
// (GET /v1/supports).
func (c *Client) Supports(ctx context.Context) (*Supports, error) {
	var out Supports
	if err := c.do(ctx, http.MethodGet, Path("supports"), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// LatestEvent returns the newest task of type eventType on resourceUUID
// in the cluster's history that was created at or after after, or nil when
// there is none yet. The task history takes no filters (the spec lists
// none), so the list is read and filtered here. after is compared at
// whole-second precision, since the service's times may be truncated to
// seconds; give the time just before the mutating request was sent.
// resourceUUID "" matches any resource and eventType "" any type. Ties on
// created_at go to the larger ID.
func (c *Client) LatestEvent(ctx context.Context, clusterUUID, resourceUUID, eventType string, after time.Time) (*Task, error) {
	tasks, err := c.ListTasks(ctx, clusterUUID)
	if err != nil {
		return nil, err
	}
	return NewestTask(tasks, resourceUUID, eventType, after), nil
}

// NewestTask is LatestEvent's filter over an already read list.
func NewestTask(tasks []Task, resourceUUID, eventType string, after time.Time) *Task {
	floor := after.Truncate(time.Second)
	var best *Task
	var bestAt time.Time
	for i := range tasks {
		t := &tasks[i]
		if (resourceUUID != "" && t.ResourceUUID != resourceUUID) || (eventType != "" && t.Type != eventType) {
			continue
		}
		at := t.Created()
		if !after.IsZero() && (at.IsZero() || at.Before(floor)) {
			continue
		}
		if best == nil || at.After(bestAt) || (at.Equal(bestAt) && t.ID > best.ID) {
			best, bestAt = t, at
		}
	}
	return best
}
