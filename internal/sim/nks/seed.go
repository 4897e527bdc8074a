package nks

import (
	"fmt"
	"time"

	cloud "github.com/runbook/runbook/internal/cloud/nks"
	"github.com/runbook/runbook/internal/sim/network"
)

// SeedCluster is a cluster to put into the world as already created
// (CREATE_COMPLETE, every group CREATE_COMPLETE), for tests that start
// from a declared world rather than build it through the API: `runbook
// test` seeds world.nks.clusters with it.
type SeedCluster struct {
	Name string
	// Version is the kube_tag of the cluster and default-master (default:
	// the newest supported version).
	Version string
	// NodeCount is the number of default-worker nodes (default 3).
	NodeCount int
	// NodeGroups are worker groups besides default-worker, in order; one
	// named default-worker sets that group's version and node count.
	NodeGroups []SeedNodeGroup
	// FixedNetwork and FixedSubnet default to the network world's default
	// network and subnet.
	FixedNetwork, FixedSubnet string
}

// SeedNodeGroup is a worker node group of a SeedCluster.
type SeedNodeGroup struct {
	Name string
	// Version defaults to the cluster's; it may be older, never newer
	// (the service never lets a worker run ahead of the control plane).
	Version string
	// NodeCount defaults to 1.
	NodeCount int
}

// Seed adds c to the world, complete, and returns its UUID. It refuses a
// name that is taken or invalid, an unknown version format, and a group
// newer than the control plane, so that a seeded world is one the
// service could have reached itself.
func (s *Service) Seed(c SeedCluster) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := cloud.CheckName("cluster", c.Name); err != nil {
		return "", fmt.Errorf("seed cluster %q: %w", c.Name, err)
	}
	for _, have := range s.clusters {
		if have.name == c.Name {
			return "", fmt.Errorf("seed cluster %q: a cluster with that name exists", c.Name)
		}
	}
	if c.Version == "" {
		c.Version = s.latest()
	}
	if err := cloud.CheckVersion(c.Version); err != nil {
		return "", fmt.Errorf("seed cluster %q: %w", c.Name, err)
	}
	if c.NodeCount <= 0 {
		c.NodeCount = 3
	}
	if c.FixedNetwork == "" {
		c.FixedNetwork, c.FixedSubnet = network.DefaultNetworkID, network.DefaultSubnetID
	}
	groups := []SeedNodeGroup{{Name: workerGroup, Version: c.Version, NodeCount: c.NodeCount}}
	for _, g := range c.NodeGroups {
		if g.Version == "" {
			g.Version = c.Version
		}
		if g.NodeCount <= 0 {
			g.NodeCount = 1
		}
		if err := s.checkSeedGroup(c, g); err != nil {
			return "", err
		}
		if g.Name == workerGroup {
			groups[0] = g
			continue
		}
		groups = append(groups, g)
	}
	s.tick()
	now := s.env.Clock.Now()
	image := network.DefaultUbuntu2204Image
	labels := map[string]string{
		"kube_tag": c.Version, "availability_zone": "kr-pub-a", "node_image": image,
		"boot_volume_type": "General SSD", "boot_volume_size": "50", "cert_manager_api": "True",
		"ca_enable": "False", "master_lb_floating_ip_enabled": "True", "cni_driver": "calico",
		"service_cluster_ip_range": defaultServiceRange, "pods_network_cidr": defaultPodNetwork,
		"pods_network_subnet": fmt.Sprint(cloud.DefaultPodSubnet), "strict_sg_rules": "False",
		"kube_version_status": s.versionStatus(c.Version), "clusterautoscale": "nodegroupfeature",
	}
	cl := &cluster{
		uuid: s.newUUID(), name: c.Name, projectID: s.tokens.Credentials().TenantID,
		flavorID: seedFlavor, keypair: "seed-key", stackID: s.newUUID(), templateID: "iaas_console",
		status: createComplete, fixedNetwork: c.FixedNetwork, fixedSubnet: c.FixedSubnet,
		labels: labels, createTimeout: 60, createdAt: now, updatedAt: now, nextHost: firstHostIdx,
	}
	master := s.seedGroup(cl, cloud.MasterNodeGroup, "master", c.Version, now)
	cl.groups = []*nodegroup{master}
	s.addNodes(cl, master, masterNodes)
	for i, g := range groups {
		ng := s.seedGroup(cl, g.Name, "worker", g.Version, now)
		ng.isDefault = i == 0
		cl.groups = append(cl.groups, ng)
		s.addNodes(cl, ng, g.NodeCount)
	}
	cl.apiAddress = s.apiAddress(cl)
	s.clusters = append(s.clusters, cl)
	return cl.uuid, nil
}

// seedFlavor is the flavor UUID of seeded clusters (the one the project's
// examples use).
const seedFlavor = "1c5b8e4b-4a57-4d51-9c6f-2b9b3f6a7a01"

func (s *Service) checkSeedGroup(c SeedCluster, g SeedNodeGroup) error {
	if g.Name == cloud.MasterNodeGroup {
		return fmt.Errorf("seed cluster %q: %s is the control plane; set the cluster's version instead", c.Name, g.Name)
	}
	if err := cloud.CheckName("node group", g.Name); err != nil {
		return fmt.Errorf("seed cluster %q: %w", c.Name, err)
	}
	if err := cloud.CheckVersion(g.Version); err != nil {
		return fmt.Errorf("seed cluster %q: node group %s: %w", c.Name, g.Name, err)
	}
	if compareVersions(g.Version, c.Version) > 0 {
		return fmt.Errorf("seed cluster %q: node group %s at %s would be newer than the control plane (%s)", c.Name, g.Name, g.Version, c.Version)
	}
	return nil
}

func (s *Service) seedGroup(c *cluster, name, role, version string, now time.Time) *nodegroup {
	g := &nodegroup{
		uuid: s.newUUID(), name: name, role: role, flavorID: c.flavorID, imageID: c.labels["node_image"],
		stackID: s.newUUID(), status: createComplete, isDefault: role == "master", createdAt: now, updatedAt: now,
		labels: map[string]string{"kube_tag": version, "availability_zone": c.labels["availability_zone"], "node_image": c.labels["node_image"]},
	}
	if role == "master" {
		g.stackID = c.stackID
	}
	return g
}
