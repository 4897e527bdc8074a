package nks

import (
	"strconv"

	"github.com/runbook/runbook/internal/cloud/nks"
	"github.com/runbook/runbook/internal/fault"
)

// The params many cluster steps share: the connection, the cluster and
// node group they act on, and the rolling-update bounds. Each step's own
// params live beside it.
//
// A limit of one field is a tag, so the playbook schema carries it; its
// value is the constant of internal/cloud/nks/rules.go (limits_test.go
// compares them). A rule between fields is a Check that calls rules.go.

type connParam struct {
	Connection string `json:"connection" default:"nks" minlen:"1" desc:"name of the connection to the cluster API"`
}

type clusterParam struct {
	Cluster string `json:"cluster" required:"true" maxlen:"255" desc:"cluster name or UUID"`
}

type nodeGroupParam struct {
	NodeGroup string `json:"nodegroup" required:"true" maxlen:"255" desc:"node group name or UUID"`
}

type groupRefParams struct {
	connParam
	clusterParam
	nodeGroupParam
}

// checkGroupRef checks the cluster and node group references.
func checkGroupRef(ps *problems, dyn map[string]bool, r groupRefParams) {
	ps.name(dyn, "cluster", "cluster", r.Cluster)
	ps.name(dyn, "nodegroup", "node group", r.NodeGroup)
}

// checkRef is the Check of a step whose one rule is its cluster
// reference: Check: (*clusterGetParams).checkRef.
func (c clusterParam) checkRef(dyn map[string]bool) []fault.Problem {
	var ps problems
	ps.name(dyn, "cluster", "cluster", c.Cluster)
	return ps
}

// checkRef is the Check of a step whose one rule is its cluster and node
// group references (it hides clusterParam's).
func (r groupRefParams) checkRef(dyn map[string]bool) []fault.Problem {
	var ps problems
	checkGroupRef(&ps, dyn, r)
	return ps
}

func groupPlanPath(r groupRefParams, rest ...string) string {
	return nks.Path(append([]string{"clusters", r.Cluster, "nodegroups", r.NodeGroup}, rest...)...)
}

// rolling are the rolling-update bounds of an upgrade and a flavor change.
type rolling struct {
	NumBufferNodes         *int `json:"num_buffer_nodes" min:"0" desc:"extra nodes added during the update (default 1; at most the group maximum minus current nodes)"`
	NumMaxUnavailableNodes *int `json:"num_max_unavailable_nodes" min:"1" desc:"nodes updated at once (default 1; at most the current nodes)"`
}

// problems collects rule violations found by the Check funcs.
type problems []fault.Problem

// add records err (a rules.go sentence) at path; nil is ignored.
func (ps *problems) add(path string, err error) {
	if err != nil {
		*ps = append(*ps, fault.Problem{Path: path, Message: err.Error()})
	}
}

// name checks a cluster or node group name or reference unless it is
// dynamic or empty (required is the tag's business).
func (ps *problems) name(dyn map[string]bool, field, kind, v string) {
	if !dyn[field] && v != "" {
		ps.add(field, nks.CheckName(kind, v))
	}
}

// The API's True/False strings and numbers as text, from typed params.

func flag(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

func optInt(p *int) string {
	if p == nil {
		return ""
	}
	return strconv.Itoa(*p)
}

func optFlag(p *bool) string {
	if p == nil {
		return ""
	}
	return flag(*p)
}
