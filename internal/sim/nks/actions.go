package nks

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	cloud "github.com/runbook/runbook/internal/cloud/nks"
)

// GET /v1/clusters/{cluster}/config
func (s *Service) config(r *http.Request) (int, any, error) {
	c, err := s.findCluster(r.PathValue("cluster"))
	if err != nil {
		return 0, nil, err
	}
	if c.apiAddress == "" {
		return 0, nil, errorf(400, "Cluster %s has no API endpoint yet (status %s).", c.uuid, c.status)
	}
	return 200, map[string]any{"config": kubeconfig(c)}, nil
}

// kubeconfig renders the kubeconfig file of a cluster.
func kubeconfig(c *cluster) string {
	fake := func(kind string) string {
		return base64.StdEncoding.EncodeToString(fmt.Appendf(nil,
			"-----BEGIN %s-----\nsimulated %s for cluster %s\n-----END %s-----\n", kind, strings.ToLower(kind), c.uuid, kind))
	}
	return fmt.Sprintf(`apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: %s
    server: %s
  name: %s
contexts:
- context:
    cluster: %s
    user: admin
  name: default
current-context: default
kind: Config
preferences: {}
users:
- name: admin
  user:
    client-certificate-data: %s
    client-key-data: %s
`, fake("CERTIFICATE"), c.apiAddress, c.name, c.name, fake("CERTIFICATE"), fake("RSA PRIVATE KEY"))
}

type cniRequest struct {
	CNI                    string     `json:"cni"`
	NumBufferNodes         flexInt    `json:"num_buffer_nodes"`
	NumMaxUnavailableNodes flexInt    `json:"num_max_unavailable_nodes"`
	PodCIDR                string     `json:"pod_cidr"`
	PodSubnet              flexString `json:"pod_subnet"`
}

// POST /v1/clusters/{cluster}/actions/cni_update
func (s *Service) cniUpdate(r *http.Request) (int, any, error) {
	c, err := s.findCluster(r.PathValue("cluster"))
	if err != nil {
		return 0, nil, err
	}
	var req cniRequest
	if err := decode(r, &req); err != nil {
		return 0, nil, err
	}
	if err := invalid(cloud.CheckCNI(req.CNI)); err != nil {
		return 0, nil, err
	}
	if c.labels["cni_driver"] != "flannel" {
		return 0, nil, errorf(400, "Cluster %s uses the %s CNI; only a change from flannel to calico is supported.", c.uuid, c.labels["cni_driver"])
	}
	if req.PodCIDR == "" {
		return 0, nil, errorf(400, "Mandatory field pod_cidr is missing.")
	}
	sub := cloud.DefaultPodSubnet
	if req.PodSubnet.set {
		if sub, err = cloud.ParsePodSubnet(req.PodSubnet.v); err != nil {
			return 0, nil, invalid(err)
		}
	}
	if err := s.checkCNIPodNetwork(c, req.PodCIDR, sub); err != nil {
		return 0, nil, err
	}
	pods := netip.MustParsePrefix(strings.TrimSpace(req.PodCIDR))
	if err := checkRollingBounds(c, nil, req.NumBufferNodes, req.NumMaxUnavailableNodes); err != nil {
		return 0, nil, err
	}
	if err := clusterBusy(c); err != nil {
		return 0, nil, err
	}
	setClusterStatus(c, s.env.Clock.Now(), updateInProgress, nil)
	s.begin(c, nil, "CLUSTER_CNI_UPDATE", func(now time.Time) {
		c.labels["cni_driver"] = "calico"
		c.labels["pods_network_cidr"] = pods.String()
		c.labels["pods_network_subnet"] = strconv.Itoa(sub)
		setClusterStatus(c, now, updateComplete, nil)
	}, func(now time.Time, contents string) {
		setClusterStatus(c, now, updateFailed, strptr(contents))
	})
	return 202, map[string]any{"uuid": c.uuid}, nil
}

type ipaclRequest struct {
	Enable  any           `json:"enable"`
	Action  string        `json:"action"`
	Targets []ipaclTarget `json:"ipacl_targets"`
}

// GET /v1/clusters/{cluster}/api_ep_ipacl
func (s *Service) getIPACL(r *http.Request) (int, any, error) {
	c, err := s.findCluster(r.PathValue("cluster"))
	if err != nil {
		return 0, nil, err
	}
	if !c.acl.enable {
		return 200, map[string]any{"cluster_uuid": c.uuid, "enable": "false"}, nil
	}
	return 200, map[string]any{"cluster_uuid": c.uuid, "enable": "true", "action": c.acl.action, "ipacl_targets": c.acl.targets}, nil
}

// POST /v1/clusters/{cluster}/api_ep_ipacl
func (s *Service) setIPACL(r *http.Request) (int, any, error) {
	c, err := s.findCluster(r.PathValue("cluster"))
	if err != nil {
		return 0, nil, err
	}
	var req ipaclRequest
	if err := decode(r, &req); err != nil {
		return 0, nil, err
	}
	var enable string
	switch v := req.Enable.(type) {
	case nil:
		return 0, nil, errorf(400, "Mandatory field enable is missing.")
	case bool: // samples of sibling fields send booleans; accept them
		enable = strconv.FormatBool(v)
	case string:
		enable = v
	default:
		return 0, nil, errorf(400, "enable must be \"true\" or \"false\".")
	}
	if err := invalid(cloud.CheckIPACLEnable(enable)); err != nil {
		return 0, nil, err
	}
	acl := ipacl{enable: enable == "true"}
	if acl.enable {
		errs := []error{cloud.CheckIPACLAction(req.Action)}
		if len(req.Targets) == 0 {
			errs = append(errs, errorf(400, "ipacl_targets must list at least one target when enable is true"))
		}
		for _, t := range req.Targets {
			errs = append(errs, cloud.CheckIPACLTarget(t.CIDRAddress, t.Description))
		}
		if err := invalid(errs...); err != nil {
			return 0, nil, err
		}
		acl.action, acl.targets = req.Action, req.Targets
	}
	if c.apiAddress == "" {
		return 0, nil, errorf(400, "Cluster %s has no API endpoint yet (status %s).", c.uuid, c.status)
	}
	if err := clusterBusy(c); err != nil {
		return 0, nil, err
	}
	setClusterStatus(c, s.env.Clock.Now(), updateInProgress, nil)
	s.begin(c, nil, "CLUSTER_API_EP_IPACL_UPDATE", func(now time.Time) {
		c.acl = acl
		setClusterStatus(c, now, updateComplete, nil)
	}, func(now time.Time, contents string) {
		setClusterStatus(c, now, updateFailed, strptr(contents))
	})
	return 202, map[string]any{"uuid": c.uuid}, nil
}
