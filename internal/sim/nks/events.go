package nks

import (
	"net/http"
	"slices"

	cloud "github.com/runbook/runbook/internal/cloud/nks"
)

// version is one entry of /v1/supports.
type version struct {
	name      string
	supported bool
}

// defaultVersions is what /v1/supports answers until SetVersion changes it:
// older releases no longer valid, recent ones valid.
func defaultVersions() []version {
	return []version{
		{"v1.23.3", false}, {"v1.24.3", false}, {"v1.25.4", false}, {"v1.26.3", false},
		{"v1.27.3", true}, {"v1.28.3", true}, {"v1.29.3", true}, {"v1.30.3", true}, {"v1.31.4", true},
	}
}

func (s *Service) setVersion(name string, supported bool) {
	for i := range s.versions {
		if s.versions[i].name == name {
			s.versions[i].supported = supported
			return
		}
	}
	s.versions = append(s.versions, version{name, supported})
	slices.SortFunc(s.versions, func(a, b version) int { return compareVersions(a.name, b.name) })
}

// latest is the newest valid version.
func (s *Service) latest() string { return cloud.LatestSupportedVersion(s.supportedMap()) }

var clusterEvents = map[string]string{
	"CLUSTER_CREATE":              "Create a cluster",
	"CLUSTER_DELETE":              "Delete a cluster",
	"CLUSTER_HANDOVER":            "Cluster owner change",
	"CLUSTER_CNI_UPDATE":          "Change CNI",
	"CLUSTER_API_EP_IPACL_UPDATE": "Change API endpoint IP access control",
	"CLUSTER_ROTATE_CERTIFICATE":  "Rotate cluster certificates",
}

var nodegroupEvents = map[string]string{
	"NODEGROUP_CREATE":                 "Node group creation",
	"NODEGROUP_DELETE":                 "Delete a node group",
	"CLUSTER_RESIZE":                   "Resize the cluster",
	"NODEGROUP_UPDATE_FLAVOR":          "Change instance type",
	"NODEGROUP_UPGRADE":                "Upgrade a node group",
	"NODEGROUP_USERSCRIPT_UPDATE":      "Change user script",
	"NODEGROUP_SET_CLUSTER_AUTOSCALER": "Change autoscaler settings",
	"NODEGROUP_NODE_ACTION_NODE_START": "Start worker node",
	"NODEGROUP_NODE_ACTION_NODE_STOP":  "Stop worker node",
	"NODEGROUP_SCALE_OUT":              "Scale out a node group (autoscaler)",
	"NODEGROUP_SCALE_IN":               "Scale in a node group (autoscaler)",
	"AUTO_HEALING":                     "Auto healing of a worker node",
}

// GET /v1/supports
func (s *Service) supports(*http.Request) (int, any, error) {
	k8s := map[string]bool{}
	for _, v := range s.versions {
		k8s[v.name] = v.supported
	}
	return 200, map[string]any{
		"supported_k8s":        k8s,
		"supported_event_type": map[string]any{"cluster_events": clusterEvents, "nodegroup_events": nodegroupEvents},
	}, nil
}

// clusterByUUID resolves the task-history paths, which take a UUID only.
func (s *Service) clusterByUUID(id string) (*cluster, error) {
	for _, c := range s.clusters {
		if c.uuid == id {
			return c, nil
		}
	}
	return nil, errorf(404, "Cluster %s could not be found.", id)
}

// GET /v1/clusters/{cluster}/events
func (s *Service) listEvents(r *http.Request) (int, any, error) {
	c, err := s.clusterByUUID(r.PathValue("cluster"))
	if err != nil {
		return 0, nil, err
	}
	out := make([]map[string]any, 0, len(c.events))
	for _, t := range c.events {
		out = append(out, s.taskView(t))
	}
	return 200, map[string]any{"events": out}, nil
}

// GET /v1/clusters/{cluster}/events/{event}
func (s *Service) getEvent(r *http.Request) (int, any, error) {
	c, err := s.clusterByUUID(r.PathValue("cluster"))
	if err != nil {
		return 0, nil, err
	}
	for _, t := range c.events {
		if t.uuid == r.PathValue("event") {
			return 200, s.taskView(t), nil
		}
	}
	return 0, nil, errorf(404, "Event %s could not be found.", r.PathValue("event"))
}

func (s *Service) taskView(t *task) map[string]any {
	var updated any
	if t.state != stateInProgress {
		updated = timestamp(t.updatedAt)
	}
	var contents any
	if t.contents != nil {
		contents = *t.contents
	} else if t.state == stateInProgress {
		contents = t.typ + " in progress"
	}
	return map[string]any{
		"id": t.id, "uuid": t.uuid, "project_id": t.cluster.projectID,
		"cluster_uuid": t.cluster.uuid, "cluster_name": t.cluster.name,
		"resource_uuid": t.resUUID, "resource_name": t.resName, "resource_type": t.resType,
		"type": t.typ, "state": t.state, "contents": contents,
		"created_at": timestamp(t.createdAt), "updated_at": updated,
	}
}
