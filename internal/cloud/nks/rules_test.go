package nks

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// wantErr checks err against want: "" means no error, otherwise err's
// message contains want.
func wantErr(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		assert.NoError(t, err)
		return
	}
	require.Error(t, err)
	assert.Contains(t, err.Error(), want)
}

// wantErrs checks a list of problems: each of want appears in one of them
// and there are exactly len(want).
func wantErrs(t *testing.T, errs []error, want ...string) {
	t.Helper()
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	require.Len(t, errs, len(want), "problems: %q", msgs)
	for _, w := range want {
		found := false
		for _, m := range msgs {
			if strings.Contains(m, w) {
				found = true
			}
		}
		assert.True(t, found, "no problem mentions %q in %q", w, msgs)
	}
}

func TestCheckResizeNodeCount(t *testing.T) {
	for _, tc := range []struct {
		name   string
		n, max int
		want   string
	}{
		{"one node is the minimum", 1, 0, ""},
		{"ten nodes is the default maximum", 10, 0, ""},
		{"zero nodes is refused", 0, 0, "node count 0 is out of range; it must be between 1 and 10"},
		{"eleven nodes is refused by default", 11, 0, "must be between 1 and 10"},
		{"a raised quota allows more", 15, 20, ""},
		{"a raised quota is still a limit", 21, 20, "between 1 and 20"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantErr(t, CheckResizeNodeCount(tc.n, tc.max), tc.want) })
	}
}

func TestParseCIDR(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"a network address is read", "10.100.0.0/16", ""},
		{"surrounding blanks are ignored", " 10.0.0.0/8 ", ""},
		{"text is refused", "ten/8", `"ten/8" is not a CIDR block`},
		{"an address without a prefix is refused", "10.0.0.0", "is not a CIDR block"},
		{"IPv6 is refused", "fd00::/64", "is not an IPv4 CIDR block"},
		{"host bits are refused with the fix", "10.100.0.5/16", "did you mean 10.100.0.0/16?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseCIDR("pod network", tc.in)
			wantErr(t, err, tc.want)
		})
	}
}

func TestParsePodSubnet(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     int
		err      string
	}{
		{"a number is read", "24", 24, ""},
		{"a slash is allowed", "/22", 22, ""},
		{"text is refused", "big", 0, `pod subnet "big" is not a prefix length`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := ParsePodSubnet(tc.in)
			wantErr(t, err, tc.err)
			assert.Equal(t, tc.want, n)
		})
	}
}

func TestCheckPodSubnetSize(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
		want string
	}{
		{"20 is the largest subnet", 20, ""},
		{"28 is the smallest subnet", 28, ""},
		{"29 is too small", 29, "pod subnet /29 is too small; the prefix must be between 20 and 28"},
		{"19 is too large", 19, "pod subnet /19 is too large; the prefix must be between 20 and 28"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantErr(t, CheckPodSubnetSize(tc.size), tc.want) })
	}
}

func TestCheckPodSubnet(t *testing.T) {
	for _, tc := range []struct {
		name string
		cidr string
		size int
		want []string
	}{
		{"a /22 network with size 24 is the documented valid pair", "10.100.0.0/22", 24, nil},
		{"a /16 network with size 24 is valid", "10.100.0.0/16", 24, nil},
		{"the size must be the prefix plus two", "10.100.0.0/22", 23, []string{"pod subnet /23 does not fit the pod network 10.100.0.0/22; the subnet prefix must be at least 24"}},
		{"a /26 network is too small", "10.100.0.0/26", 27, []string{"pod network 10.100.0.0/26 is too small; blocks smaller than /24 are rejected", "at least 28"}},
		{"a size out of range and a bad network both show", "nope", 29, []string{"/29 is too small", `"nope" is not a CIDR block`}},
	} {
		t.Run(tc.name, func(t *testing.T) { wantErrs(t, CheckPodSubnet(tc.cidr, tc.size), tc.want...) })
	}
}

func TestCheckCIDRSize(t *testing.T) {
	for _, tc := range []struct{ name, cidr, want string }{
		{"a /24 is accepted", "10.0.0.0/24", ""},
		{"a /26 is rejected", "10.0.0.0/26", "service network 10.0.0.0/26 is too small"},
		{"a /30 is rejected", "10.0.0.0/30", "blocks smaller than /24 are rejected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParseCIDR("service network", tc.cidr)
			require.NoError(t, err)
			wantErr(t, CheckCIDRSize("service network", p), tc.want)
		})
	}
}

func TestCheckClusterNetworks(t *testing.T) {
	ok := ClusterNetworks{FixedSubnet: "192.168.0.0/24", PodsNetwork: "10.100.0.0/16", ServiceNetwork: "10.254.0.0/16", KubeTag: "v1.28.3"}
	with := func(f func(*ClusterNetworks)) ClusterNetworks { n := ok; f(&n); return n }
	for _, tc := range []struct {
		name string
		n    ClusterNetworks
		want []string
	}{
		{"distinct private bands are accepted", ok, nil},
		{"empty bands are not checked", ClusterNetworks{}, nil},
		{"the link-local band is refused", with(func(n *ClusterNetworks) { n.PodsNetwork = "169.254.0.0/16" }),
			[]string{"pod network 169.254.0.0/16 overlaps the link-local band 169.254.0.0/16"}},
		{"the internal band is refused", with(func(n *ClusterNetworks) { n.ServiceNetwork = "198.18.0.0/24" }),
			[]string{"service network 198.18.0.0/24 overlaps the internal band 198.18.0.0/19"}},
		{"a block holding the internal band is refused", with(func(n *ClusterNetworks) { n.PodsNetwork = "198.0.0.0/8" }),
			[]string{"overlaps the internal band"}},
		{"the bridge range is refused on v1.23.3", with(func(n *ClusterNetworks) { n.PodsNetwork = "172.17.0.0/16"; n.KubeTag = "v1.23.3" }),
			[]string{"pod network 172.17.0.0/16 overlaps the bridge range 172.17.0.0/16, reserved on clusters of version v1.23.3 or earlier (this one is v1.23.3)"}},
		{"the bridge range is refused on older versions", with(func(n *ClusterNetworks) { n.PodsNetwork = "172.16.0.0/12"; n.KubeTag = "v1.22.3" }),
			[]string{"bridge range"}},
		{"the bridge range is allowed on v1.24.3", with(func(n *ClusterNetworks) { n.PodsNetwork = "172.17.0.0/16"; n.KubeTag = "v1.24.3" }), nil},
		{"the pod and service networks must not overlap", with(func(n *ClusterNetworks) { n.ServiceNetwork = "10.100.128.0/24" }),
			[]string{"pod network 10.100.0.0/16 overlaps the service network 10.100.128.0/24; the cluster's bands must not overlap each other"}},
		{"the VPC subnet must not overlap the pod network", with(func(n *ClusterNetworks) { n.FixedSubnet = "10.100.3.0/24" }),
			[]string{"VPC subnet 10.100.3.0/24 overlaps the pod network 10.100.0.0/16"}},
		{"a small service network is refused", with(func(n *ClusterNetworks) { n.ServiceNetwork = "10.254.0.0/26" }),
			[]string{"service network 10.254.0.0/26 is too small"}},
		{"a small VPC subnet is not a size problem", with(func(n *ClusterNetworks) { n.FixedSubnet = "192.168.0.0/28" }), nil},
		{"every problem is reported", with(func(n *ClusterNetworks) { n.PodsNetwork = "169.254.0.0/16"; n.ServiceNetwork = "bad" }),
			[]string{"link-local", `"bad" is not a CIDR block`}},
	} {
		t.Run(tc.name, func(t *testing.T) { wantErrs(t, CheckClusterNetworks(tc.n), tc.want...) })
	}
}

func TestCheckCNIPodCIDR(t *testing.T) {
	avoid := CNINetworks{ServiceNetwork: "10.254.0.0/16", VPCSubnets: []string{"192.168.0.0/24", "garbage"}, UsedPodNetworks: []string{"10.200.0.0/16"}}
	for _, tc := range []struct {
		name string
		cidr string
		size int
		want []string
	}{
		{"a free network is accepted", "10.100.0.0/16", 24, nil},
		{"the service network is refused", "10.254.0.0/20", 24, []string{"pod network 10.254.0.0/20 overlaps the cluster's service network 10.254.0.0/16"}},
		{"a VPC subnet is refused", "192.168.0.0/16", 24, []string{"overlaps the VPC subnet 192.168.0.0/24"}},
		{"a used pod network is refused", "10.200.0.0/20", 24, []string{"overlaps the pod network already used by a cluster 10.200.0.0/16"}},
		{"the internal band is refused", "198.18.0.0/20", 24, []string{"internal band"}},
		{"the link-local band is refused", "169.254.0.0/20", 24, []string{"link-local"}},
		{"the pod subnet rules apply", "10.100.0.0/22", 29, []string{"/29 is too small"}},
	} {
		t.Run(tc.name, func(t *testing.T) { wantErrs(t, CheckCNIPodCIDR(tc.cidr, tc.size, avoid), tc.want...) })
	}
}

func TestCheckBufferNodes(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		n, maxGroup, current int
		want                 string
	}{
		{"zero buffer nodes is allowed", 0, 10, 10, ""},
		{"negative is refused", -1, 0, 0, "buffer nodes -1 is negative; it must be at least 0"},
		{"the room left in the group is the maximum", 3, 10, 7, ""},
		{"more than the room left is refused", 4, 10, 7, "buffer nodes 4 is too many; at most 3 fit (10 nodes per group minus 7 current)"},
		{"an unknown maximum checks only the lower bound", 50, 0, 3, ""},
	} {
		t.Run(tc.name, func(t *testing.T) { wantErr(t, CheckBufferNodes(tc.n, tc.maxGroup, tc.current), tc.want) })
	}
}

func TestCheckMaxUnavailableNodes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		n, current int
		want       string
	}{
		{"one is the minimum", 1, 3, ""},
		{"zero is refused", 0, 3, "max unavailable nodes 0 is too few; it must be at least 1"},
		{"the current node count is the maximum", 3, 3, ""},
		{"more than the current nodes is refused", 4, 3, "max unavailable nodes 4 is more than the 3 current nodes"},
		{"an unknown node count checks only the lower bound", 9, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) { wantErr(t, CheckMaxUnavailableNodes(tc.n, tc.current), tc.want) })
	}
}

func TestCheckName(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"a plain name is accepted", "prod-cluster-1", ""},
		{"an empty name is refused", "", "cluster name is empty"},
		{"a long name is refused", strings.Repeat("a", 256), "cluster name is 256 characters long; at most 255 are allowed"},
		{"a name of exactly 255 characters is accepted", strings.Repeat("é", 255), ""},
		{"a slash is refused", "a/b", "must not contain '/'"},
		{"blanks around are refused", " a", "leading or trailing blanks"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantErr(t, CheckName("cluster", tc.in), tc.want) })
	}
	t.Run("a long description is refused", func(t *testing.T) {
		wantErr(t, CheckDescription("description", strings.Repeat("é", 256)), "description is 256 characters long")
		wantErr(t, CheckDescription("description", strings.Repeat("é", 255)), "")
	})
}

func TestVersions(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"v1.28.3 is a version", "v1.28.3", ""},
		{"a missing v is refused", "1.28.3", `version "1.28.3" is not of the form v1.28.3`},
		{"two components are refused", "v1.28", "is not of the form"},
		{"leading zeros are refused", "v1.028.3", "is not of the form"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantErr(t, CheckVersion(tc.in), tc.want) })
	}
	for _, tc := range []struct {
		name, a, b string
		want       int
	}{
		{"minor versions compare as numbers", "v1.9.0", "v1.10.0", -1},
		{"equal versions compare equal", "v1.28.3", "v1.28.3", 0},
		{"patch versions decide last", "v1.28.4", "v1.28.3", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := CompareVersions(tc.a, tc.b)
			require.NoError(t, err)
			assert.Equal(t, tc.want, c)
		})
	}
	supported := map[string]bool{"v1.27.3": true, "v1.28.3": true, "v1.26.3": false, "v1.9.9": true}
	t.Run("the newest supported version is found", func(t *testing.T) {
		assert.Equal(t, "v1.28.3", LatestSupportedVersion(supported))
		assert.Equal(t, "", LatestSupportedVersion(nil))
	})
	for _, tc := range []struct{ name, in, want string }{
		{"a supported version is accepted", "v1.28.3", ""},
		{"a retired version is refused", "v1.26.3", "version v1.26.3 is no longer supported; supported versions: v1.9.9, v1.27.3, v1.28.3"},
		{"an unknown version is refused", "v1.30.0", "version v1.30.0 is not offered by the service"},
		{"a malformed version is refused", "latest", "is not of the form"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantErr(t, CheckSupportedVersion(tc.in, supported), tc.want) })
	}
}

func TestCheckUpgrade(t *testing.T) {
	for _, tc := range []struct {
		name string
		u    UpgradeCheck
		want string
	}{
		{"the master goes first", UpgradeCheck{MasterNodeGroup, "v1.28.3", "v1.27.3", "v1.27.3"}, ""},
		{"a worker may follow the master", UpgradeCheck{"pool-a", "v1.28.3", "v1.28.3", "v1.27.3"}, ""},
		{"a worker may not pass the master", UpgradeCheck{"pool-a", "v1.28.3", "v1.27.3", "v1.27.3"},
			"worker node group pool-a cannot go to v1.28.3 above the master version v1.27.3; upgrade default-master to v1.28.3 first"},
		{"a group is never downgraded", UpgradeCheck{"pool-a", "v1.26.3", "v1.27.3", "v1.27.3"}, "runs v1.27.3; downgrading to v1.26.3 is not supported"},
		{"a group at the target is reported", UpgradeCheck{"pool-a", "v1.28.3", "v1.28.3", "v1.28.3"}, "node group pool-a is already at v1.28.3"},
		{"unknown current versions are not checked", UpgradeCheck{NodeGroup: "pool-a", Target: "v1.28.3"}, ""},
		{"a malformed target is refused", UpgradeCheck{NodeGroup: "pool-a", Target: "1.28"}, "is not of the form"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantErr(t, CheckUpgrade(tc.u), tc.want) })
	}
	t.Run("already at the version is a sentinel", func(t *testing.T) {
		err := CheckUpgrade(UpgradeCheck{"pool-a", "v1.28.3", "v1.28.3", "v1.28.3"})
		assert.True(t, errors.Is(err, ErrAlreadyAtVersion))
	})
}

func TestEnumRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"True is a flag", CheckFlag("ca_enable", "True"), ""},
		{"lowercase true is not a flag", CheckFlag("ca_enable", "true"), `ca_enable must be "True" or "False" (got "true")`},
		{"enable true is accepted", CheckIPACLEnable("true"), ""},
		{"enable yes is refused", CheckIPACLEnable("yes"), `enable must be "true" or "false"`},
		{"ALLOW is an action", CheckIPACLAction("ALLOW"), ""},
		{"allow is not an action", CheckIPACLAction("allow"), "action must be ALLOW or DENY"},
		{"an address is a target", CheckIPACLTarget("203.0.113.7", ""), ""},
		{"a range is a target", CheckIPACLTarget("203.0.113.0/24", "office"), ""},
		{"a name is not a target", CheckIPACLTarget("office", ""), `"office" is neither an IP address nor a CIDR range`},
		{"an empty target is refused", CheckIPACLTarget("", ""), "has no cidr_address"},
		{"a node list is read", CheckNodeList("a:b"), ""},
		{"an empty node list is refused", CheckNodeList(""), "node list is empty"},
		{"an empty node entry is refused", CheckNodeList("a::b"), "empty entry at position 2"},
		{"calico is the CNI target", CheckCNI("calico"), ""},
		{"flannel is not a CNI target", CheckCNI("flannel"), `CNI "flannel" cannot be selected`},
		{"flavor_id is the change type", CheckFlavorChangeType("flavor_id"), ""},
		{"another change type is refused", CheckFlavorChangeType("image"), `must be "flavor_id"`},
		{"iaas_console is the template", CheckClusterTemplate("iaas_console"), ""},
		{"another template is refused", CheckClusterTemplate("k8s"), `must be "iaas_console"`},
	} {
		t.Run(tc.name, func(t *testing.T) { wantErr(t, tc.err, tc.want) })
	}
}

func TestCheckAutoscalerNodeCounts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		min, max int
		want     string
	}{
		{"a minimum below the maximum is fine", 1, 3, ""},
		{"equal bounds are fine", 2, 2, ""},
		{"a minimum above the maximum is refused", 5, 2, "autoscaler minimum 5 is above the maximum 2"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantErr(t, CheckAutoscalerNodeCounts(tc.min, tc.max), tc.want) })
	}
}
