package nks

import (
	"net/http"
	"slices"
	"time"

	cloud "github.com/runbook/runbook/internal/cloud/nks"
)

// GET /v1/clusters/{cluster}/nodegroups
//
// The real service keeps default-master out of sight (a GET on it answers
// 403), so the list shows the worker groups.
func (s *Service) listGroups(r *http.Request) (int, any, error) {
	c, err := s.findCluster(r.PathValue("cluster"))
	if err != nil {
		return 0, nil, err
	}
	out := make([]map[string]any, 0, len(c.groups))
	for _, g := range c.workers() {
		out = append(out, map[string]any{
			"uuid": g.uuid, "name": g.name, "flavor_id": g.flavorID, "image_id": g.imageID,
			"max_node_count": g.maxNodes, "min_node_count": g.minNodes, "node_count": len(g.nodes),
			"role": g.role, "stack_id": g.stackID, "status": g.status, "is_default": g.isDefault,
		})
	}
	return 200, map[string]any{"nodegroups": out}, nil
}

// group resolves the cluster and node group of a node-group path.
func (s *Service) group(r *http.Request) (*cluster, *nodegroup, error) {
	c, err := s.findCluster(r.PathValue("cluster"))
	if err != nil {
		return nil, nil, err
	}
	g, err := c.findGroup(r.PathValue("ng"))
	if err != nil {
		return nil, nil, err
	}
	return c, g, nil
}

// workerGroup resolves a node-group path that must name a worker group.
func (s *Service) workerGroup(r *http.Request, what string) (*cluster, *nodegroup, error) {
	c, g, err := s.group(r)
	if err != nil {
		return nil, nil, err
	}
	if g.role == "master" {
		return nil, nil, errorf(400, "%s is not supported on the master nodegroup %s.", what, g.name)
	}
	return c, g, nil
}

// GET /v1/clusters/{cluster}/nodegroups/{ng}
func (s *Service) getGroup(r *http.Request) (int, any, error) {
	c, g, err := s.group(r)
	if err != nil {
		return 0, nil, err
	}
	if g.role == "master" {
		return 0, nil, errorf(403, "Access to the master nodegroup %s is not permitted.", g.name)
	}
	out := s.groupView(c, g)
	out["stack_id"] = g.stackID
	out["status"] = g.status
	out["status_reason"] = g.statusReason
	out["node_addresses"] = nonNil(addresses(g))
	out["created_at"] = timestamp(g.createdAt)
	out["updated_at"] = timestamp(g.updatedAt)
	out["is_default"] = g.isDefault
	nodes := make([]map[string]any, 0, len(g.nodes))
	for _, n := range g.nodes {
		nodes = append(nodes, map[string]any{"uuid": n.uuid, "name": n.name, "address": n.address, "status": n.status})
	}
	out["nodes"] = nodes
	return 200, out, nil
}

// groupView holds the fields the create answer and the single read share.
func (s *Service) groupView(c *cluster, g *nodegroup) map[string]any {
	return map[string]any{
		"uuid": g.uuid, "name": g.name, "cluster_id": c.uuid, "flavor_id": g.flavorID, "image_id": g.imageID,
		"labels": copyLabels(g.labels), "max_node_count": g.maxNodes, "min_node_count": g.minNodes,
		"node_count": len(g.nodes), "project_id": c.projectID, "role": g.role,
		"links": s.links("clusters/" + c.uuid + "/nodegroups/" + g.uuid),
	}
}

type createGroupRequest struct {
	Name      string  `json:"name"`
	FlavorID  string  `json:"flavor_id"`
	ImageID   string  `json:"image_id"`
	NodeCount flexInt `json:"node_count"`
	Labels    labels  `json:"labels"`
}

// groupLabelKeys are the labels a node-group create accepts.
var groupLabelKeys = []string{
	"availability_zone", "boot_volume_type", "boot_volume_size", "boot_volume_key_id", "boot_volume_appkey",
	"ca_enable", "ca_max_node_count", "ca_min_node_count", "ca_scale_down_enable",
	"ca_scale_down_unneeded_time", "ca_scale_down_util_thresh", "ca_scale_down_delay_after_add",
	"user_script", "user_script_v2", "additional_network_id_list", "additional_subnet_id_list",
}

// POST /v1/clusters/{cluster}/nodegroups
func (s *Service) createGroup(r *http.Request) (int, any, error) {
	c, err := s.findCluster(r.PathValue("cluster"))
	if err != nil {
		return 0, nil, err
	}
	var req createGroupRequest
	if err := decode(r, &req); err != nil {
		return 0, nil, err
	}
	for _, f := range []struct{ name, v string }{{"name", req.Name}, {"flavor_id", req.FlavorID}, {"image_id", req.ImageID}} {
		if f.v == "" {
			return 0, nil, errorf(400, "Mandatory field %s is missing.", f.name)
		}
	}
	if req.Labels == nil {
		return 0, nil, errorf(400, "Mandatory field labels is missing.")
	}
	for _, k := range []string{"availability_zone", "boot_volume_type", "boot_volume_size", "ca_enable"} {
		if req.Labels[k] == "" {
			return 0, nil, errorf(400, "Mandatory label %s is missing.", k)
		}
	}
	if err := invalid(cloud.CheckName("node group", req.Name)); err != nil {
		return 0, nil, err
	}
	if err := s.checkImage("image_id", req.ImageID); err != nil {
		return 0, nil, err
	}
	if err := checkAutoscalerLabels(req.Labels); err != nil {
		return 0, nil, err
	}
	count := req.NodeCount.or(1)
	if err := checkNodeCount(count); err != nil {
		return 0, nil, err
	}
	if _, err := c.findGroup(req.Name); err == nil {
		return 0, nil, errorf(409, "A nodegroup with name %s already exists in cluster %s.", req.Name, c.name)
	}
	if inProgress(c.status) {
		return 0, nil, errorf(400, "Cluster %s already has an operation in progress (%s).", c.uuid, c.status)
	}
	if c.status == createFailed {
		return 0, nil, errorf(400, "Cluster %s is in status %s; node groups cannot be added.", c.uuid, c.status)
	}
	now := s.env.Clock.Now()
	g := &nodegroup{
		uuid: s.newUUID(), name: req.Name, role: "worker", flavorID: req.FlavorID, imageID: req.ImageID,
		stackID: s.newUUID(), status: createInProgress, createdAt: now, updatedAt: now,
		labels: map[string]string{"kube_tag": c.master().labels["kube_tag"], "node_image": req.ImageID},
	}
	for _, k := range groupLabelKeys {
		if v, ok := req.Labels[k]; ok {
			g.labels[k] = v
		}
	}
	for _, k := range []string{"cert_manager_api", "external_network_id", "external_subnet_id_list", "strict_sg_rules"} {
		if v, ok := c.labels[k]; ok {
			g.labels[k] = v
		}
	}
	c.groups = append(c.groups, g)
	s.addNodes(c, g, count)
	s.begin(c, g, "NODEGROUP_CREATE", func(now time.Time) {
		setGroupStatus(g, now, createComplete, nil)
	}, func(now time.Time, contents string) {
		setGroupStatus(g, now, createFailed, strptr(contents))
	})
	return 202, s.groupView(c, g), nil
}

// DELETE /v1/clusters/{cluster}/nodegroups/{ng}
func (s *Service) deleteGroup(r *http.Request) (int, any, error) {
	c, g, err := s.group(r)
	if err != nil {
		return 0, nil, err
	}
	if g.role == "master" {
		return 0, nil, errorf(400, "Deleting the master nodegroup is not supported.")
	}
	if len(c.workers()) == 1 {
		return 0, nil, errorf(400, "Deleting the last nodegroup is not supported.")
	}
	if err := groupBusy(c, g); err != nil {
		return 0, nil, err
	}
	setGroupStatus(g, s.env.Clock.Now(), deleteInProgress, nil)
	s.begin(c, g, "NODEGROUP_DELETE", func(time.Time) {
		c.groups = slices.DeleteFunc(c.groups, func(x *nodegroup) bool { return x == g })
	}, func(now time.Time, contents string) {
		setGroupStatus(g, now, deleteFailed, strptr(contents))
	})
	return 204, nil, nil
}

type flavorRequest struct {
	Type                   string  `json:"type"`
	FlavorID               string  `json:"flavor_id"`
	NumBufferNodes         flexInt `json:"num_buffer_nodes"`
	NumMaxUnavailableNodes flexInt `json:"num_max_unavailable_nodes"`
}

// PATCH /v1/clusters/{cluster}/nodegroups/{ng}
func (s *Service) changeFlavor(r *http.Request) (int, any, error) {
	c, g, err := s.workerGroup(r, "Changing the instance flavor")
	if err != nil {
		return 0, nil, err
	}
	var req flavorRequest
	if err := decode(r, &req); err != nil {
		return 0, nil, err
	}
	if err := invalid(cloud.CheckFlavorChangeType(req.Type)); err != nil {
		return 0, nil, err
	}
	if req.FlavorID == "" {
		return 0, nil, errorf(400, "Mandatory field flavor_id is missing.")
	}
	if req.FlavorID == g.flavorID {
		return 0, nil, errorf(400, "Nodegroup %s already uses flavor %s.", g.name, req.FlavorID)
	}
	if err := checkRollingBounds(c, g, req.NumBufferNodes, req.NumMaxUnavailableNodes); err != nil {
		return 0, nil, err
	}
	if err := groupBusy(c, g); err != nil {
		return 0, nil, err
	}
	setGroupStatus(g, s.env.Clock.Now(), updateInProgress, nil)
	s.begin(c, g, "NODEGROUP_UPDATE_FLAVOR", func(now time.Time) {
		g.flavorID = req.FlavorID
		if g.name == workerGroup {
			c.flavorID = req.FlavorID
		}
		setGroupStatus(g, now, updateComplete, nil)
	}, func(now time.Time, contents string) {
		setGroupStatus(g, now, updateFailed, strptr(contents))
	})
	return 202, map[string]any{"uuid": g.uuid}, nil
}
