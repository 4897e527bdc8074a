package nks

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	cloud "github.com/runbook/runbook/internal/cloud/nks"
)

// Defaults of the network labels when a create leaves them out.
const (
	defaultServiceRange = "10.254.0.0/16"
	defaultPodNetwork   = "10.100.0.0/16"
	defaultPodSubnet    = 24
)

// workerLabelKeys are the create labels that describe the default worker
// node group and are copied to it.
var workerLabelKeys = []string{
	"availability_zone", "node_image", "boot_volume_type", "boot_volume_size", "boot_volume_key_id",
	"boot_volume_appkey", "external_network_id", "external_subnet_id_list", "cert_manager_api",
	"ca_enable", "ca_max_node_count", "ca_min_node_count", "ca_scale_down_enable",
	"ca_scale_down_unneeded_time", "ca_scale_down_util_thresh", "ca_scale_down_delay_after_add",
	"kube_tag", "user_script", "user_script_v2", "additional_network_id_list",
	"additional_subnet_id_list", "strict_sg_rules",
}

type createClusterRequest struct {
	Name              string  `json:"name"`
	Keypair           string  `json:"keypair"`
	ClusterTemplateID string  `json:"cluster_template_id"`
	NodeCount         flexInt `json:"node_count"`
	FlavorID          string  `json:"flavor_id"`
	FixedNetwork      string  `json:"fixed_network"`
	FixedSubnet       string  `json:"fixed_subnet"`
	CreateTimeout     flexInt `json:"create_timeout"`
	Labels            labels  `json:"labels"`
}

// POST /v1/clusters
func (s *Service) createCluster(r *http.Request) (int, any, error) {
	var req createClusterRequest
	if err := decode(r, &req); err != nil {
		return 0, nil, err
	}
	for _, f := range []struct{ name, v string }{
		{"name", req.Name}, {"keypair", req.Keypair}, {"cluster_template_id", req.ClusterTemplateID},
		{"flavor_id", req.FlavorID}, {"fixed_network", req.FixedNetwork}, {"fixed_subnet", req.FixedSubnet},
	} {
		if f.v == "" {
			return 0, nil, errorf(400, "Mandatory field %s is missing.", f.name)
		}
	}
	if err := invalid(cloud.CheckName("cluster", req.Name), cloud.CheckClusterTemplate(req.ClusterTemplateID)); err != nil {
		return 0, nil, err
	}
	if !req.NodeCount.set {
		return 0, nil, errorf(400, "Mandatory field node_count is missing.")
	}
	if req.Labels == nil {
		return 0, nil, errorf(400, "Mandatory field labels is missing.")
	}
	l := req.Labels
	for _, k := range []string{"availability_zone", "node_image", "boot_volume_type", "boot_volume_size",
		"cert_manager_api", "ca_enable", "kube_tag", "master_lb_floating_ip_enabled"} {
		if l[k] == "" {
			return 0, nil, errorf(400, "Mandatory label %s is missing.", k)
		}
	}
	if l["cert_manager_api"] != "True" {
		return 0, nil, errorf(400, "Label cert_manager_api must be True (got %q).", l["cert_manager_api"])
	}
	for _, k := range []string{"master_lb_floating_ip_enabled", "strict_sg_rules"} {
		if v, ok := l[k]; ok {
			if err := checkFlag("label "+k, v); err != nil {
				return 0, nil, err
			}
		}
	}
	if err := cloud.CheckSupportedVersion(l["kube_tag"], s.supportedMap()); err != nil {
		return 0, nil, errorf(400, "Received invalid tag for kube_tag. %s.", strings.ToUpper(err.Error()[:1])+err.Error()[1:])
	}
	if err := checkNodeCount(req.NodeCount.v); err != nil {
		return 0, nil, err
	}
	if err := checkAutoscalerLabels(l); err != nil {
		return 0, nil, err
	}
	switch l["cni_driver"] {
	case "":
		l["cni_driver"] = "calico"
	case "calico", "calico-ebpf", "flannel":
	default:
		return 0, nil, errorf(400, "Label cni_driver must be calico or calico-ebpf (got %q).", l["cni_driver"])
	}
	if l["service_cluster_ip_range"] == "" {
		l["service_cluster_ip_range"] = defaultServiceRange
	}
	if l["pods_network_cidr"] == "" {
		l["pods_network_cidr"] = defaultPodNetwork
	}
	if l["pods_network_subnet"] == "" {
		l["pods_network_subnet"] = strconv.Itoa(cloud.DefaultPodSubnet)
	}
	if l["strict_sg_rules"] == "" {
		l["strict_sg_rules"] = "False"
	}
	if err := s.checkReferences(req.FixedNetwork, req.FixedSubnet, l); err != nil {
		return 0, nil, err
	}
	if err := s.checkCreateNetworks(l, req.FixedSubnet); err != nil {
		return 0, nil, err
	}
	for _, c := range s.clusters {
		if c.name == req.Name {
			return 0, nil, errorf(409, "A cluster with name %s already exists.", req.Name)
		}
	}

	now := s.env.Clock.Now()
	l["kube_version_status"] = s.versionStatus(l["kube_tag"])
	l["clusterautoscale"] = "nodegroupfeature"
	c := &cluster{
		uuid: s.newUUID(), name: req.Name, projectID: s.tokens.Credentials().TenantID,
		flavorID: req.FlavorID, keypair: req.Keypair, stackID: s.newUUID(), templateID: req.ClusterTemplateID,
		status: createInProgress, fixedNetwork: req.FixedNetwork, fixedSubnet: req.FixedSubnet,
		labels: l, createTimeout: req.CreateTimeout.or(60), createdAt: now, updatedAt: now, nextHost: firstHostIdx,
	}
	master := &nodegroup{
		uuid: s.newUUID(), name: cloud.MasterNodeGroup, role: "master", flavorID: req.FlavorID, imageID: l["node_image"],
		stackID: c.stackID, status: createInProgress, isDefault: true, createdAt: now, updatedAt: now,
		labels: map[string]string{"kube_tag": l["kube_tag"], "availability_zone": l["availability_zone"], "node_image": l["node_image"]},
	}
	worker := &nodegroup{
		uuid: s.newUUID(), name: workerGroup, role: "worker", flavorID: req.FlavorID, imageID: l["node_image"],
		stackID: s.newUUID(), status: createInProgress, isDefault: true, createdAt: now, updatedAt: now,
		labels: map[string]string{},
	}
	for _, k := range workerLabelKeys {
		if v, ok := l[k]; ok {
			worker.labels[k] = v
		}
	}
	c.groups = []*nodegroup{master, worker}
	s.addNodes(c, master, masterNodes)
	s.addNodes(c, worker, req.NodeCount.v)
	s.clusters = append(s.clusters, c)
	s.begin(c, nil, "CLUSTER_CREATE", func(now time.Time) {
		c.apiAddress = s.apiAddress(c)
		setClusterStatus(c, now, createComplete, nil)
		for _, g := range c.groups {
			setGroupStatus(g, now, createComplete, nil)
		}
	}, func(now time.Time, contents string) {
		setClusterStatus(c, now, createFailed, strptr(contents))
		for _, g := range c.groups {
			setGroupStatus(g, now, createFailed, strptr(contents))
		}
	})
	return 202, map[string]any{"uuid": c.uuid}, nil
}

// versionStatus is the kube_version_status label of a master version.
func (s *Service) versionStatus(v string) string {
	if v == s.latest() {
		return "LATEST"
	}
	return "NEED_UPGRADE"
}

// apiAddress is the endpoint a completed cluster answers on: a public
// address when master_lb_floating_ip_enabled, else the first master's.
func (s *Service) apiAddress(c *cluster) string {
	if c.labels["master_lb_floating_ip_enabled"] == "True" {
		return fmt.Sprintf("https://133.186.%d.%d:6443", s.rnd.IntN(250)+1, s.rnd.IntN(250)+2)
	}
	return "https://" + c.master().nodes[0].address + ":6443"
}

// GET /v1/clusters
func (s *Service) listClusters(*http.Request) (int, any, error) {
	out := make([]map[string]any, 0, len(s.clusters))
	for _, c := range s.clusters {
		out = append(out, s.clusterSummary(c))
	}
	return 200, map[string]any{"clusters": out}, nil
}

func (s *Service) clusterSummary(c *cluster) map[string]any {
	return map[string]any{
		"uuid": c.uuid, "name": c.name, "flavor_id": c.flavorID, "keypair": c.keypair,
		"node_count": c.workerNodes(), "stack_id": c.stackID, "status": c.status,
		"labels": copyLabels(c.labels), "master_count": len(c.master().nodes),
		"health_status": healthStatus(c.status), "create_timeout": c.createTimeout,
		"cluster_template_id": c.templateID, "links": s.links("clusters/" + c.uuid),
	}
}

func healthStatus(status string) any {
	if status == createComplete || status == updateComplete {
		return "FRESH"
	}
	return nil
}

func (s *Service) links(rel string) []map[string]string {
	return []map[string]string{
		{"href": "http://" + s.region + "-api-kubernetes-infrastructure.nhncloudservice.com/v1/" + rel, "rel": "self"},
		{"href": "http://" + s.region + "-api-kubernetes-infrastructure.nhncloudservice.com/" + rel, "rel": "bookmark"},
	}
}

// GET /v1/clusters/{cluster}
func (s *Service) getCluster(r *http.Request) (int, any, error) {
	c, err := s.findCluster(r.PathValue("cluster"))
	if err != nil {
		return 0, nil, err
	}
	out := s.clusterSummary(c)
	var addrs []string
	for _, g := range c.workers() {
		for _, n := range g.nodes {
			if n.status == nodeActive {
				addrs = append(addrs, n.address)
			}
		}
	}
	var api any
	if c.apiAddress != "" {
		api = c.apiAddress
	}
	out["status_reason"] = c.statusReason
	out["api_address"] = api
	out["project_id"] = c.projectID
	out["fixed_network"] = c.fixedNetwork
	out["fixed_subnet"] = c.fixedSubnet
	out["node_addresses"] = nonNil(addrs)
	out["master_addresses"] = nonNil(addresses(c.master()))
	out["created_at"] = timestamp(c.createdAt)
	out["updated_at"] = timestamp(c.updatedAt)
	out["health_status_reason"] = map[string]any{}
	return 200, out, nil
}

func addresses(g *nodegroup) []string {
	var out []string
	for _, n := range g.nodes {
		if n.status == nodeActive {
			out = append(out, n.address)
		}
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// DELETE /v1/clusters/{cluster}
func (s *Service) deleteCluster(r *http.Request) (int, any, error) {
	c, err := s.findCluster(r.PathValue("cluster"))
	if err != nil {
		return 0, nil, err
	}
	if err := clusterBusy(c); err != nil {
		return 0, nil, err
	}
	now := s.env.Clock.Now()
	setClusterStatus(c, now, deleteInProgress, nil)
	s.begin(c, nil, "CLUSTER_DELETE", func(time.Time) {
		s.clusters = slices.DeleteFunc(s.clusters, func(x *cluster) bool { return x == c })
	}, func(now time.Time, contents string) {
		setClusterStatus(c, now, deleteFailed, strptr(contents))
	})
	return 204, nil, nil
}

type resizeRequest struct {
	Nodegroup     string   `json:"nodegroup"`
	NodeCount     flexInt  `json:"node_count"`
	NodesToRemove []string `json:"nodes_to_remove"`
}

// POST /v1/clusters/{cluster}/actions/resize
func (s *Service) resize(r *http.Request) (int, any, error) {
	c, err := s.findCluster(r.PathValue("cluster"))
	if err != nil {
		return 0, nil, err
	}
	var req resizeRequest
	if err := decode(r, &req); err != nil {
		return 0, nil, err
	}
	if req.Nodegroup == "" {
		return 0, nil, errorf(400, "Mandatory field nodegroup is missing.")
	}
	if !req.NodeCount.set {
		return 0, nil, errorf(400, "Mandatory field node_count is missing.")
	}
	g, err := c.findGroup(req.Nodegroup)
	if err != nil {
		return 0, nil, err
	}
	if g.role == "master" {
		return 0, nil, errorf(400, "Resizing the master nodegroup is not supported.")
	}
	if err := checkNodeCount(req.NodeCount.v); err != nil {
		return 0, nil, err
	}
	if g.labels["ca_enable"] == "True" {
		return 0, nil, errorf(400, "Nodegroup %s has the cluster autoscaler enabled; its node count cannot be changed by resize.", g.name)
	}
	remove := map[string]bool{}
	for _, id := range req.NodesToRemove {
		if !slices.ContainsFunc(g.nodes, func(n *node) bool { return n.uuid == id }) {
			return 0, nil, errorf(400, "Node %s is not in nodegroup %s.", id, g.name)
		}
		remove[id] = true
	}
	if len(remove) > 0 && len(g.nodes)-len(remove) < req.NodeCount.v {
		return 0, nil, errorf(400, "nodes_to_remove lists %d nodes but resizing nodegroup %s from %d to %d removes %d.",
			len(remove), g.name, len(g.nodes), req.NodeCount.v, max(len(g.nodes)-req.NodeCount.v, 0))
	}
	if err := clusterBusy(c); err != nil {
		return 0, nil, err
	}
	now := s.env.Clock.Now()
	setClusterStatus(c, now, updateInProgress, nil)
	setGroupStatus(g, now, updateInProgress, nil)
	target := req.NodeCount.v
	s.begin(c, g, "CLUSTER_RESIZE", func(now time.Time) {
		if len(g.nodes) > target {
			g.nodes = slices.DeleteFunc(g.nodes, func(n *node) bool { return remove[n.uuid] })
		}
		for len(g.nodes) > target {
			i := s.rnd.IntN(len(g.nodes))
			g.nodes = slices.Delete(g.nodes, i, i+1)
		}
		s.addNodes(c, g, target-len(g.nodes))
		setClusterStatus(c, now, updateComplete, nil)
		setGroupStatus(g, now, updateComplete, nil)
	}, func(now time.Time, contents string) {
		setClusterStatus(c, now, updateFailed, strptr(contents))
		setGroupStatus(g, now, updateFailed, strptr(contents))
	})
	return 202, map[string]any{"uuid": c.uuid}, nil
}
