package nks

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	cloud "github.com/runbook/runbook/internal/cloud/nks"
)

type nodeListRequest struct {
	NodeList string `json:"node_list"`
}

// POST .../nodegroups/{ng}/stop_node
func (s *Service) stopNodes(r *http.Request) (int, any, error) {
	return s.nodeAction(r, "NODEGROUP_NODE_ACTION_NODE_STOP", nodeActive, nodeShutoff)
}

// POST .../nodegroups/{ng}/start_node
func (s *Service) startNodes(r *http.Request) (int, any, error) {
	return s.nodeAction(r, "NODEGROUP_NODE_ACTION_NODE_START", nodeShutoff, nodeActive)
}

// nodeAction moves the listed nodes from one status to another when the
// task succeeds. Stopped nodes keep counting in node_count but leave
// node_addresses.
func (s *Service) nodeAction(r *http.Request, typ, from, to string) (int, any, error) {
	c, g, err := s.workerGroup(r, "Stopping and starting nodes")
	if err != nil {
		return 0, nil, err
	}
	var req nodeListRequest
	if err := decode(r, &req); err != nil {
		return 0, nil, err
	}
	if err := invalid(cloud.CheckNodeList(req.NodeList)); err != nil {
		return 0, nil, err
	}
	var targets []*node
	for _, id := range strings.Split(req.NodeList, ":") {
		id = strings.TrimSpace(id)
		i := slices.IndexFunc(g.nodes, func(n *node) bool { return n.uuid == id })
		if i < 0 {
			return 0, nil, errorf(400, "Node %s is not in nodegroup %s.", id, g.name)
		}
		if g.nodes[i].status != from {
			return 0, nil, errorf(400, "Node %s is %s; it must be %s.", id, g.nodes[i].status, from)
		}
		targets = append(targets, g.nodes[i])
	}
	if err := groupBusy(c, g); err != nil {
		return 0, nil, err
	}
	setGroupStatus(g, s.env.Clock.Now(), updateInProgress, nil)
	s.begin(c, g, typ, func(now time.Time) {
		for _, n := range targets {
			n.status = to
		}
		setGroupStatus(g, now, updateComplete, nil)
	}, func(now time.Time, contents string) {
		setGroupStatus(g, now, updateFailed, strptr(contents))
	})
	return 202, map[string]any{"uuid": g.uuid}, nil
}

// autoscalerKeys and their values when a group never set them.
var autoscalerDefaults = []struct{ key, def string }{
	{"ca_enable", "False"},
	{"ca_max_node_count", "10"},
	{"ca_min_node_count", "1"},
	{"ca_scale_down_enable", "True"},
	{"ca_scale_down_unneeded_time", "10"},
	{"ca_scale_down_util_thresh", "50"},
	{"ca_scale_down_delay_after_add", "10"},
}

// GET .../nodegroups/{ng}/autoscale
func (s *Service) getAutoscale(r *http.Request) (int, any, error) {
	_, g, err := s.workerGroup(r, "The cluster autoscaler")
	if err != nil {
		return 0, nil, err
	}
	out := map[string]any{"ca_image": "registry.k8s.io/autoscaling/cluster-autoscaler", "clusterautoscale": "nodegroupfeature"}
	for _, d := range autoscalerDefaults {
		v, ok := g.labels[d.key]
		if !ok {
			v = d.def
		}
		out[d.key] = labelValue(v)
	}
	return 200, out, nil
}

// POST .../nodegroups/{ng}/autoscale
func (s *Service) setAutoscale(r *http.Request) (int, any, error) {
	c, g, err := s.workerGroup(r, "The cluster autoscaler")
	if err != nil {
		return 0, nil, err
	}
	var req labels
	if err := decode(r, &req); err != nil {
		return 0, nil, err
	}
	if req["ca_enable"] == "" {
		return 0, nil, errorf(400, "Mandatory field ca_enable is missing.")
	}
	set := map[string]string{}
	for _, d := range autoscalerDefaults {
		if v, ok := req[d.key]; ok {
			set[d.key] = v
		}
	}
	merged := copyLabels(g.labels)
	for k, v := range set {
		merged[k] = v
	}
	if err := checkAutoscalerLabels(merged); err != nil {
		return 0, nil, err
	}
	if err := groupBusy(c, g); err != nil {
		return 0, nil, err
	}
	setGroupStatus(g, s.env.Clock.Now(), updateInProgress, nil)
	s.begin(c, g, "NODEGROUP_SET_CLUSTER_AUTOSCALER", func(now time.Time) {
		g.labels = merged
		if merged["ca_enable"] == "True" {
			lo, _ := strconv.Atoi(autoscalerValue(merged, "ca_min_node_count"))
			hi, _ := strconv.Atoi(autoscalerValue(merged, "ca_max_node_count"))
			g.minNodes, g.maxNodes = &lo, &hi
			if len(g.nodes) < lo {
				s.addNodes(c, g, lo-len(g.nodes))
			}
			if len(g.nodes) > hi {
				g.nodes = g.nodes[:hi]
			}
		} else {
			g.minNodes, g.maxNodes = nil, nil
		}
		setGroupStatus(g, now, updateComplete, nil)
	}, func(now time.Time, contents string) {
		setGroupStatus(g, now, updateFailed, strptr(contents))
	})
	return 202, map[string]any{"uuid": g.uuid}, nil
}

func autoscalerValue(l map[string]string, key string) string {
	if v, ok := l[key]; ok {
		return v
	}
	for _, d := range autoscalerDefaults {
		if d.key == key {
			return d.def
		}
	}
	return ""
}

type upgradeRequest struct {
	Version                string  `json:"version"`
	NumBufferNodes         flexInt `json:"num_buffer_nodes"`
	NumMaxUnavailableNodes flexInt `json:"num_max_unavailable_nodes"`
}

// POST .../nodegroups/{ng}/upgrade
//
// Master first: default-master may move to any newer valid version; a
// worker group up to the master's version, never above it.
func (s *Service) upgrade(r *http.Request) (int, any, error) {
	c, g, err := s.group(r)
	if err != nil {
		return 0, nil, err
	}
	var req upgradeRequest
	if err := decode(r, &req); err != nil {
		return 0, nil, err
	}
	if req.Version == "" {
		return 0, nil, errorf(400, "Mandatory field version is missing.")
	}
	if err := invalid(cloud.CheckSupportedVersion(req.Version, s.supportedMap())); err != nil {
		return 0, nil, err
	}
	if err := invalid(cloud.CheckUpgrade(cloud.UpgradeCheck{
		NodeGroup: g.name, Target: req.Version,
		MasterVersion: c.master().labels["kube_tag"], GroupVersion: g.labels["kube_tag"],
	})); err != nil {
		return 0, nil, err
	}
	if g.role == "master" {
		if err := clusterBusy(c); err != nil {
			return 0, nil, err
		}
	} else {
		if err := checkRollingBounds(c, g, req.NumBufferNodes, req.NumMaxUnavailableNodes); err != nil {
			return 0, nil, err
		}
		if err := groupBusy(c, g); err != nil {
			return 0, nil, err
		}
	}
	now := s.env.Clock.Now()
	setGroupStatus(g, now, updateInProgress, nil)
	if g.role == "master" {
		setClusterStatus(c, now, updateInProgress, nil)
	}
	version := req.Version
	s.begin(c, g, "NODEGROUP_UPGRADE", func(now time.Time) {
		g.labels["kube_tag"] = version
		setGroupStatus(g, now, updateComplete, nil)
		if g.role == "master" {
			c.labels["kube_tag"] = version
			c.labels["kube_version_status"] = s.versionStatus(version)
			setClusterStatus(c, now, updateComplete, nil)
		}
	}, func(now time.Time, contents string) {
		setGroupStatus(g, now, updateFailed, strptr(contents))
		if g.role == "master" {
			setClusterStatus(c, now, updateFailed, strptr(contents))
		}
	})
	return 202, map[string]any{"uuid": g.uuid}, nil
}

type userScriptRequest struct {
	Contents *string `json:"contents"`
}

// POST .../nodegroups/{ng}/userscript (default-master accepted)
func (s *Service) userScript(r *http.Request) (int, any, error) {
	c, g, err := s.group(r)
	if err != nil {
		return 0, nil, err
	}
	var req userScriptRequest
	if err := decode(r, &req); err != nil {
		return 0, nil, err
	}
	if req.Contents == nil {
		return 0, nil, errorf(400, "Mandatory field contents is missing.")
	}
	if err := groupBusy(c, g); err != nil {
		return 0, nil, err
	}
	setGroupStatus(g, s.env.Clock.Now(), updateInProgress, nil)
	contents := *req.Contents
	s.begin(c, g, "NODEGROUP_USERSCRIPT_UPDATE", func(now time.Time) {
		g.labels["user_script_v2"] = contents
		setGroupStatus(g, now, updateComplete, nil)
	}, func(now time.Time, contents string) {
		setGroupStatus(g, now, updateFailed, strptr(contents))
	})
	return 202, map[string]any{"uuid": g.uuid}, nil
}
