package nks

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// This file holds the spec's request rules: its limits as constants and
// its rules as pure functions. The simulator enforces them on what it
// receives. The steps carry each per-field limit in a params tag (so the
// playbook schema shows it; their tests compare every such tag with the
// constant here) and check the rules between fields with these functions,
// on literal params at load time and on expression-fed params before the
// call. Every function returns nil or an error whose message is a
// self-contained sentence fit for a diagnostic ("pod subnet /29 is too
// small; ..."); the caller prefixes the position or field path.

// Limits from the spec's tables.
const (
	// MinResizeNodeCount and DefaultMaxNodeCount bound a resize's
	// node_count (the maximum is adjustable by quota).
	MinResizeNodeCount  = 1
	DefaultMaxNodeCount = 10
	// MinPodSubnet and MaxPodSubnet bound pods_network_subnet / pod_subnet;
	// DefaultPodSubnet is the CNI change's default.
	MinPodSubnet     = 20
	MaxPodSubnet     = 28
	DefaultPodSubnet = 24
	// MinBufferNodes and MinMaxUnavailableNodes are the lower bounds of a
	// rolling update's num_buffer_nodes and num_max_unavailable_nodes; the
	// upper bounds depend on the node group (CheckBufferNodes,
	// CheckMaxUnavailableNodes).
	MinBufferNodes         = 0
	MinMaxUnavailableNodes = 1
	// PodSubnetMargin: the pod subnet size must be at least this much
	// greater than the pod network's prefix length.
	PodSubnetMargin = 2
	// MaxCIDRPrefix: pod and service blocks smaller than a /24 (a longer
	// prefix, like /26) are rejected.
	MaxCIDRPrefix = 24
	// MaxNameLength and MaxDescriptionLength: the spec gives no length
	// limits; these are the columns of the Magnum schema it derives from.
	MaxNameLength        = 255
	MaxDescriptionLength = 255
	// MasterNodeGroup is the node group path segment of the master
	// components (upgrade, user script).
	MasterNodeGroup = "default-master"
	// ClusterTemplateID is the only accepted cluster_template_id.
	ClusterTemplateID = "iaas_console"
	// CNICalico is the only selectable target of a CNI change.
	CNICalico = "calico"
	// FlavorChangeType is the only accepted "type" of a flavor change.
	FlavorChangeType = "flavor_id"
	// IPACLAllow and IPACLDeny are the actions of the API endpoint's IP
	// access control.
	IPACLAllow = "ALLOW"
	IPACLDeny  = "DENY"
	// VersionPattern is the form of an orchestrator version (kube_tag,
	// upgrade version): vMAJOR.MINOR.PATCH without leading zeros.
	VersionPattern = `^v(0|[1-9][0-9]*)[.](0|[1-9][0-9]*)[.](0|[1-9][0-9]*)$`
	// BridgeRangeLastVersion is the newest version whose clusters must not
	// overlap BridgeRange.
	BridgeRangeLastVersion = "v1.23.3"
)

// Reserved bands of the CIDR rules.
var (
	LinkLocalBand = netip.MustParsePrefix("169.254.0.0/16")
	InternalBand  = netip.MustParsePrefix("198.18.0.0/19")
	BridgeRange   = netip.MustParsePrefix("172.17.0.0/16")
)

// CheckResizeNodeCount checks a resize's node_count: between 1 and max
// (DefaultMaxNodeCount when max <= 0).
func CheckResizeNodeCount(n, max int) error {
	if max <= 0 {
		max = DefaultMaxNodeCount
	}
	if n < MinResizeNodeCount || n > max {
		return fmt.Errorf("node count %d is out of range; it must be between %d and %d", n, MinResizeNodeCount, max)
	}
	return nil
}

// ParseCIDR reads an IPv4 network in CIDR notation ("10.100.0.0/16").
// what names the value in messages ("pod network"). The address must be
// the network address: host bits set are an error that names the fix.
func ParseCIDR(what, s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%s %q is not a CIDR block like 10.100.0.0/16", what, s)
	}
	if !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("%s %q is not an IPv4 CIDR block", what, s)
	}
	if m := p.Masked(); m != p {
		return netip.Prefix{}, fmt.Errorf("%s %q has host bits set; did you mean %s?", what, s, m)
	}
	return p, nil
}

// CheckCIDRSize rejects blocks smaller than a /24 (prefix longer than
// MaxCIDRPrefix).
func CheckCIDRSize(what string, p netip.Prefix) error {
	if p.Bits() > MaxCIDRPrefix {
		return fmt.Errorf("%s %s is too small; blocks smaller than /%d are rejected", what, p, MaxCIDRPrefix)
	}
	return nil
}

// ParsePodSubnet reads a pod subnet size given as text ("24" or "/24"),
// as the create labels and the CNI change send it.
func ParsePodSubnet(s string) (int, error) {
	t := strings.TrimPrefix(strings.TrimSpace(s), "/")
	n, err := strconv.Atoi(t)
	if err != nil {
		return 0, fmt.Errorf("pod subnet %q is not a prefix length; use a number between %d and %d", s, MinPodSubnet, MaxPodSubnet)
	}
	return n, nil
}

// CheckPodSubnetSize checks a pod subnet size alone: 20..28.
func CheckPodSubnetSize(size int) error {
	switch {
	case size > MaxPodSubnet:
		return fmt.Errorf("pod subnet /%d is too small; the prefix must be between %d and %d", size, MinPodSubnet, MaxPodSubnet)
	case size < MinPodSubnet:
		return fmt.Errorf("pod subnet /%d is too large; the prefix must be between %d and %d", size, MinPodSubnet, MaxPodSubnet)
	}
	return nil
}

// CheckPodSubnet checks a pod network and its subnet size together: the
// network is a valid block no smaller than /24, the size is 20..28 and at
// least the network's prefix length + 2 (a /22 network with size 24 is
// valid). It returns every problem found.
func CheckPodSubnet(podCIDR string, size int) []error {
	var errs []error
	if err := CheckPodSubnetSize(size); err != nil {
		errs = append(errs, err)
	}
	p, err := ParseCIDR("pod network", podCIDR)
	if err != nil {
		return append(errs, err)
	}
	if err := CheckCIDRSize("pod network", p); err != nil {
		errs = append(errs, err)
	}
	if size < p.Bits()+PodSubnetMargin {
		errs = append(errs, fmt.Errorf("pod subnet /%d does not fit the pod network %s; the subnet prefix must be at least %d (the network's prefix + %d)",
			size, p, p.Bits()+PodSubnetMargin, PodSubnetMargin))
	}
	return errs
}

// ClusterNetworks are the three bands of a cluster that the CIDR rules
// constrain, as CIDR text; an empty field is not checked. KubeTag is the
// cluster's version; the bridge-range rule applies when it is
// BridgeRangeLastVersion or earlier (not when it is empty or malformed).
type ClusterNetworks struct {
	FixedSubnet    string // the CIDR of the VPC subnet named by fixed_subnet
	PodsNetwork    string // labels.pods_network_cidr
	ServiceNetwork string // labels.service_cluster_ip_range
	KubeTag        string
}

// CheckClusterNetworks applies the spec's CIDR rules to a cluster's
// bands: none overlaps the link-local band, the internal band or (for
// v1.23.3 and earlier) the bridge range; they do not overlap each other;
// the pod and service networks are no smaller than /24. It returns every
// problem found.
func CheckClusterNetworks(n ClusterNetworks) []error {
	type band struct {
		what string
		p    netip.Prefix
	}
	var errs []error
	var bands []band
	for _, b := range []struct {
		what, cidr string
		sized      bool
	}{
		{"VPC subnet", n.FixedSubnet, false},
		{"pod network", n.PodsNetwork, true},
		{"service network", n.ServiceNetwork, true},
	} {
		if strings.TrimSpace(b.cidr) == "" {
			continue
		}
		p, err := ParseCIDR(b.what, b.cidr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if b.sized {
			if err := CheckCIDRSize(b.what, p); err != nil {
				errs = append(errs, err)
			}
		}
		errs = append(errs, checkReserved(b.what, p, n.KubeTag)...)
		bands = append(bands, band{b.what, p})
	}
	for i := range bands {
		for j := i + 1; j < len(bands); j++ {
			if bands[i].p.Overlaps(bands[j].p) {
				errs = append(errs, fmt.Errorf("%s %s overlaps the %s %s; the cluster's bands must not overlap each other",
					bands[i].what, bands[i].p, bands[j].what, bands[j].p))
			}
		}
	}
	return errs
}

func checkReserved(what string, p netip.Prefix, kubeTag string) []error {
	var errs []error
	if p.Overlaps(LinkLocalBand) {
		errs = append(errs, fmt.Errorf("%s %s overlaps the link-local band %s", what, p, LinkLocalBand))
	}
	if p.Overlaps(InternalBand) {
		errs = append(errs, fmt.Errorf("%s %s overlaps the internal band %s", what, p, InternalBand))
	}
	if BridgeRangeApplies(kubeTag) && p.Overlaps(BridgeRange) {
		errs = append(errs, fmt.Errorf("%s %s overlaps the bridge range %s, reserved on clusters of version %s or earlier (this one is %s)",
			what, p, BridgeRange, BridgeRangeLastVersion, kubeTag))
	}
	return errs
}

// BridgeRangeApplies reports whether a cluster of version kubeTag must
// avoid BridgeRange: true for v1.23.3 and earlier, false for later,
// empty or malformed versions.
func BridgeRangeApplies(kubeTag string) bool {
	c, err := CompareVersions(kubeTag, BridgeRangeLastVersion)
	return err == nil && c <= 0
}

// CNINetworks is what a CNI change's pod_cidr must avoid besides the
// reserved bands: the cluster's service network, the subnets of its VPC
// network and additional networks, and pod networks already used by a
// cluster. Entries are CIDR text; malformed entries are ignored (they are
// the service's data, not the user's).
type CNINetworks struct {
	ServiceNetwork  string
	VPCSubnets      []string
	UsedPodNetworks []string
}

// CheckCNIPodCIDR checks a CNI change's pod_cidr and pod_subnet: the pod
// subnet rules of CheckPodSubnet, and no overlap with the link-local band,
// the internal band, or anything in avoid. It returns every problem found.
func CheckCNIPodCIDR(podCIDR string, podSubnet int, avoid CNINetworks) []error {
	errs := CheckPodSubnet(podCIDR, podSubnet)
	p, err := ParseCIDR("pod network", podCIDR)
	if err != nil {
		return errs // already reported
	}
	errs = append(errs, checkReserved("pod network", p, "")...)
	overlap := func(what, s string) {
		q, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err == nil && p.Overlaps(q) {
			errs = append(errs, fmt.Errorf("pod network %s overlaps the %s %s", p, what, q.Masked()))
		}
	}
	if avoid.ServiceNetwork != "" {
		overlap("cluster's service network", avoid.ServiceNetwork)
	}
	for _, s := range avoid.VPCSubnets {
		overlap("VPC subnet", s)
	}
	for _, s := range avoid.UsedPodNetworks {
		overlap("pod network already used by a cluster", s)
	}
	return errs
}

// CheckBufferNodes checks num_buffer_nodes: at least 0 and at most the
// maximum nodes per worker node group minus the group's current nodes.
// maxPerGroup <= 0 means the maximum is unknown (load time): only the
// lower bound is checked.
func CheckBufferNodes(n, maxPerGroup, current int) error {
	if n < MinBufferNodes {
		return fmt.Errorf("buffer nodes %d is negative; it must be at least %d", n, MinBufferNodes)
	}
	if maxPerGroup > 0 {
		limit := max(maxPerGroup-current, 0)
		if n > limit {
			return fmt.Errorf("buffer nodes %d is too many; at most %d fit (%d nodes per group minus %d current)", n, limit, maxPerGroup, current)
		}
	}
	return nil
}

// CheckMaxUnavailableNodes checks num_max_unavailable_nodes: at least 1
// and at most current, the current nodes (of the group for an upgrade or
// flavor change, of the cluster for a CNI change). current <= 0 means
// unknown (load time): only the lower bound is checked.
func CheckMaxUnavailableNodes(n, current int) error {
	if n < MinMaxUnavailableNodes {
		return fmt.Errorf("max unavailable nodes %d is too few; it must be at least %d", n, MinMaxUnavailableNodes)
	}
	if current > 0 && n > current {
		return fmt.Errorf("max unavailable nodes %d is more than the %d current nodes", n, current)
	}
	return nil
}

// CheckAutoscalerNodeCounts checks that the autoscaler's fewest nodes
// (ca_min_node_count) is not above its most nodes (ca_max_node_count).
func CheckAutoscalerNodeCounts(minNodes, maxNodes int) error {
	if minNodes > maxNodes {
		return fmt.Errorf("autoscaler minimum %d is above the maximum %d", minNodes, maxNodes)
	}
	return nil
}

// CheckName checks a cluster or node group name (kind is "cluster" or
// "node group"): not empty, at most MaxNameLength characters, no
// surrounding blanks and none of / ? # % (names are used in paths).
func CheckName(kind, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%s name is empty", kind)
	case utf8.RuneCountInString(name) > MaxNameLength:
		return fmt.Errorf("%s name is %d characters long; at most %d are allowed", kind, utf8.RuneCountInString(name), MaxNameLength)
	case strings.TrimSpace(name) != name:
		return fmt.Errorf("%s name %q has leading or trailing blanks", kind, name)
	case strings.ContainsAny(name, "/?#%"):
		return fmt.Errorf("%s name %q must not contain '/', '?', '#' or '%%'", kind, name)
	}
	return nil
}

// CheckDescription checks a free-text description (an IP access control
// target's): at most MaxDescriptionLength characters.
func CheckDescription(what, s string) error {
	if n := utf8.RuneCountInString(s); n > MaxDescriptionLength {
		return fmt.Errorf("%s is %d characters long; at most %d are allowed", what, n, MaxDescriptionLength)
	}
	return nil
}

var versionRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(VersionPattern) })

// Version is an orchestrator version (kube_tag) like v1.28.3.
type Version struct{ Major, Minor, Patch int }

func (v Version) String() string { return fmt.Sprintf("v%d.%d.%d", v.Major, v.Minor, v.Patch) }

// Compare returns -1, 0 or 1 as v is older than, equal to or newer than w.
func (v Version) Compare(w Version) int {
	for _, d := range [3]int{v.Major - w.Major, v.Minor - w.Minor, v.Patch - w.Patch} {
		if d < 0 {
			return -1
		}
		if d > 0 {
			return 1
		}
	}
	return 0
}

// ParseVersion reads a version of the form vMAJOR.MINOR.PATCH.
func ParseVersion(s string) (Version, error) {
	m := versionRE().FindStringSubmatch(s)
	if m == nil {
		return Version{}, fmt.Errorf("version %q is not of the form v1.28.3", s)
	}
	var v Version
	for i, dst := range []*int{&v.Major, &v.Minor, &v.Patch} {
		n, err := strconv.Atoi(m[i+1])
		if err != nil {
			return Version{}, fmt.Errorf("version %q: component %q is too large", s, m[i+1])
		}
		*dst = n
	}
	return v, nil
}

// CheckVersion checks the format of a version (kube_tag, upgrade version).
func CheckVersion(s string) error {
	_, err := ParseVersion(s)
	return err
}

// CompareVersions compares two version strings (see Version.Compare).
func CompareVersions(a, b string) (int, error) {
	va, err := ParseVersion(a)
	if err != nil {
		return 0, err
	}
	vb, err := ParseVersion(b)
	if err != nil {
		return 0, err
	}
	return va.Compare(vb), nil
}

// CheckSupportedVersion checks a version against the supported_k8s map of
// /v1/supports: it must be present and true.
func CheckSupportedVersion(version string, supported map[string]bool) error {
	if err := CheckVersion(version); err != nil {
		return err
	}
	if ok, known := supported[version]; !known {
		return fmt.Errorf("version %s is not offered by the service; supported versions: %s", version, supportedList(supported))
	} else if !ok {
		return fmt.Errorf("version %s is no longer supported; supported versions: %s", version, supportedList(supported))
	}
	return nil
}

// LatestSupportedVersion returns the newest version that supported marks
// true ("" when none).
func LatestSupportedVersion(supported map[string]bool) string {
	var best Version
	found := ""
	for s, ok := range supported {
		v, err := ParseVersion(s)
		if !ok || err != nil {
			continue
		}
		if found == "" || v.Compare(best) > 0 {
			best, found = v, s
		}
	}
	return found
}

func supportedList(supported map[string]bool) string {
	var vs []Version
	for s, ok := range supported {
		if v, err := ParseVersion(s); ok && err == nil {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return "none"
	}
	for i := 1; i < len(vs); i++ { // insertion sort: a handful of versions
		for j := i; j > 0 && vs[j].Compare(vs[j-1]) < 0; j-- {
			vs[j], vs[j-1] = vs[j-1], vs[j]
		}
	}
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.String()
	}
	return strings.Join(parts, ", ")
}

// UpgradeCheck is what CheckUpgrade needs to know about one node group
// upgrade: the group (MasterNodeGroup for the master components), the
// target version, the master's current version (the cluster's kube_tag)
// and the group's current version (its kube_tag label; for the master,
// the same as MasterVersion).
type UpgradeCheck struct {
	NodeGroup     string
	Target        string
	MasterVersion string
	GroupVersion  string
}

// ErrAlreadyAtVersion is returned by CheckUpgrade when the group already
// runs the target version: the ordered upgrade skips such groups.
var ErrAlreadyAtVersion = errors.New("the node group already runs the target version")

// CheckUpgrade applies the upgrade ordering rules: master components are
// upgraded first, so a worker group may never go above the master's
// version; no group is downgraded. A group already at the target returns
// an error wrapping ErrAlreadyAtVersion. Empty current versions are not
// checked.
func CheckUpgrade(u UpgradeCheck) error {
	target, err := ParseVersion(u.Target)
	if err != nil {
		return err
	}
	if u.GroupVersion != "" {
		cur, err := ParseVersion(u.GroupVersion)
		if err == nil {
			switch c := target.Compare(cur); {
			case c == 0:
				return fmt.Errorf("node group %s is already at %s: %w", u.NodeGroup, u.Target, ErrAlreadyAtVersion)
			case c < 0:
				return fmt.Errorf("node group %s runs %s; downgrading to %s is not supported", u.NodeGroup, u.GroupVersion, u.Target)
			}
		}
	}
	if u.NodeGroup != MasterNodeGroup && u.MasterVersion != "" {
		m, err := ParseVersion(u.MasterVersion)
		if err == nil && target.Compare(m) > 0 {
			return fmt.Errorf("worker node group %s cannot go to %s above the master version %s; upgrade %s to %s first",
				u.NodeGroup, u.Target, u.MasterVersion, MasterNodeGroup, u.Target)
		}
	}
	return nil
}

// CheckFlag checks a True/False label (ca_enable, cert_manager_api, ...).
func CheckFlag(what, v string) error {
	if v != "True" && v != "False" {
		return fmt.Errorf("%s must be \"True\" or \"False\" (got %q)", what, v)
	}
	return nil
}

// CheckIPACLEnable checks the IP access control's enable: "true" or "false".
func CheckIPACLEnable(v string) error {
	if v != "true" && v != "false" {
		return fmt.Errorf("IP access control enable must be \"true\" or \"false\" (got %q)", v)
	}
	return nil
}

// CheckIPACLAction checks the IP access control's action: ALLOW or DENY.
func CheckIPACLAction(v string) error {
	if v != IPACLAllow && v != IPACLDeny {
		return fmt.Errorf("IP access control action must be %s or %s (got %q)", IPACLAllow, IPACLDeny, v)
	}
	return nil
}

// CheckIPACLTarget checks one target's cidr_address (an IP address or a
// CIDR range) and description.
func CheckIPACLTarget(cidrAddress, description string) error {
	s := strings.TrimSpace(cidrAddress)
	if s == "" {
		return errors.New("IP access control target has no cidr_address")
	}
	if _, err := netip.ParseAddr(s); err != nil {
		if _, err := netip.ParsePrefix(s); err != nil {
			return fmt.Errorf("IP access control target %q is neither an IP address nor a CIDR range", cidrAddress)
		}
	}
	return CheckDescription("IP access control target description", description)
}

// CheckNodeList checks a stop/start node_list: one or more node instance
// UUIDs separated by colons, none empty.
func CheckNodeList(s string) error {
	if strings.TrimSpace(s) == "" {
		return errors.New("node list is empty; give node instance UUIDs separated by ':'")
	}
	for i, id := range strings.Split(s, ":") {
		if strings.TrimSpace(id) == "" {
			return fmt.Errorf("node list %q has an empty entry at position %d", s, i+1)
		}
	}
	return nil
}

// CheckCNI checks a CNI change's target: only "calico" is selectable.
func CheckCNI(cni string) error {
	if cni != CNICalico {
		return fmt.Errorf("CNI %q cannot be selected; the only target is %q", cni, CNICalico)
	}
	return nil
}

// CheckFlavorChangeType checks a flavor change's type: "flavor_id".
func CheckFlavorChangeType(t string) error {
	if t != FlavorChangeType {
		return fmt.Errorf("flavor change type must be %q (got %q)", FlavorChangeType, t)
	}
	return nil
}

// CheckClusterTemplate checks cluster_template_id: "iaas_console".
func CheckClusterTemplate(id string) error {
	if id != ClusterTemplateID {
		return fmt.Errorf("cluster template must be %q (got %q)", ClusterTemplateID, id)
	}
	return nil
}
