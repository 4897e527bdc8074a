package nks

import (
	"slices"
	"strconv"
	"strings"

	cloud "github.com/runbook/runbook/internal/cloud/nks"
)

// The limits are those of internal/cloud/nks (rules.go), shared with the
// client and the steps: the simulator only turns their errors into the
// API's 400 answers.

// invalid turns rule errors into one 400 answer (nil when there are none).
func invalid(errs ...error) error {
	var msgs []string
	for _, err := range errs {
		if err != nil && !slices.Contains(msgs, err.Error()) {
			msgs = append(msgs, err.Error())
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	d := strings.Join(msgs, "; ")
	return errorf(400, "%s.", strings.ToUpper(d[:1])+d[1:])
}

func checkNodeCount(n int) error { return invalid(cloud.CheckResizeNodeCount(n, 0)) }

// compareVersions orders two versions (malformed ones by text, which only
// the admin routes could introduce).
func compareVersions(a, b string) int {
	c, err := cloud.CompareVersions(a, b)
	if err != nil {
		return strings.Compare(a, b)
	}
	return c
}

func checkFlag(what, v string) error { return invalid(cloud.CheckFlag(what, v)) }

// checkAutoscalerLabels checks the ca_* settings: flags are True/False,
// node counts are within the resize bounds with min <= max, the other
// values positive integers (util_thresh a percentage). The spec gives no
// bounds for these beyond the node quota; these are the simulator's.
func checkAutoscalerLabels(l map[string]string) error {
	var errs []error
	for _, k := range []string{"ca_enable", "ca_scale_down_enable"} {
		if v, ok := l[k]; ok {
			errs = append(errs, cloud.CheckFlag(k, v))
		}
	}
	ints := map[string]int{}
	for _, k := range []string{"ca_max_node_count", "ca_min_node_count", "ca_scale_down_unneeded_time",
		"ca_scale_down_util_thresh", "ca_scale_down_delay_after_add"} {
		v, ok := l[k]
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			errs = append(errs, errorf(400, "%s must be a positive integer (got %q)", k, v))
			continue
		}
		ints[k] = n
	}
	for _, k := range []string{"ca_min_node_count", "ca_max_node_count"} {
		if n, ok := ints[k]; ok {
			if err := cloud.CheckResizeNodeCount(n, 0); err != nil {
				errs = append(errs, errorf(400, "%s: %v", k, err))
			}
		}
	}
	lo, okLo := ints["ca_min_node_count"]
	hi, okHi := ints["ca_max_node_count"]
	if okLo && okHi && lo > hi {
		errs = append(errs, errorf(400, "ca_min_node_count %d is above ca_max_node_count %d", lo, hi))
	}
	if n, ok := ints["ca_scale_down_util_thresh"]; ok && n > 100 {
		errs = append(errs, errorf(400, "ca_scale_down_util_thresh %d is not a percentage (1..100)", n))
	}
	return invalid(errs...)
}

// checkCreateNetworks applies the CIDR rules to the VPC subnet, the pod
// network and the service network of a new cluster.
func (s *Service) checkCreateNetworks(l map[string]string, fixedSubnet string) error {
	size, err := cloud.ParsePodSubnet(l["pods_network_subnet"])
	if err != nil {
		return invalid(err)
	}
	errs := cloud.CheckPodSubnet(l["pods_network_cidr"], size)
	errs = append(errs, cloud.CheckClusterNetworks(cloud.ClusterNetworks{
		FixedSubnet:    s.subnetCIDR(fixedSubnet).String(),
		PodsNetwork:    l["pods_network_cidr"],
		ServiceNetwork: l["service_cluster_ip_range"],
		KubeTag:        l["kube_tag"],
	})...)
	return invalid(errs...)
}

// checkCNIPodNetwork applies the CNI change's rules: the pod subnet rules
// and no overlap with the reserved bands, the cluster's service network,
// its VPC subnets or the pod network it uses now.
func (s *Service) checkCNIPodNetwork(c *cluster, podCIDR string, size int) error {
	avoid := cloud.CNINetworks{
		ServiceNetwork:  c.labels["service_cluster_ip_range"],
		VPCSubnets:      []string{s.subnetCIDR(c.fixedSubnet).String()},
		UsedPodNetworks: []string{c.labels["pods_network_cidr"]},
	}
	for _, id := range strings.Split(c.labels["additional_subnet_id_list"], ":") {
		if p, ok := s.subnets[id]; ok {
			avoid.VPCSubnets = append(avoid.VPCSubnets, p.String())
		}
	}
	return invalid(cloud.CheckCNIPodCIDR(podCIDR, size, avoid)...)
}

// checkRollingBounds checks num_buffer_nodes (0 .. quota minus the nodes of
// the group; for a cluster-wide change, of its fullest worker group) and
// num_max_unavailable_nodes (1 .. the nodes of the group, or of the
// cluster for a CNI change).
func checkRollingBounds(c *cluster, g *nodegroup, buffer, unavailable flexInt) error {
	current, total := 0, c.workerNodes()
	if g != nil {
		current, total = len(g.nodes), len(g.nodes)
	} else {
		for _, w := range c.workers() {
			current = max(current, len(w.nodes))
		}
	}
	var errs []error
	if buffer.set {
		errs = append(errs, cloud.CheckBufferNodes(buffer.v, cloud.DefaultMaxNodeCount, current))
	}
	if unavailable.set {
		errs = append(errs, cloud.CheckMaxUnavailableNodes(unavailable.v, total))
	}
	return invalid(errs...)
}

// supportedMap is the supported_k8s answer.
func (s *Service) supportedMap() map[string]bool {
	out := make(map[string]bool, len(s.versions))
	for _, v := range s.versions {
		out[v.name] = v.supported
	}
	return out
}
