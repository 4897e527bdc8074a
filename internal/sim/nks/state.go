package nks

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Cluster and node group statuses (Magnum's).
const (
	createInProgress = "CREATE_IN_PROGRESS"
	createComplete   = "CREATE_COMPLETE"
	createFailed     = "CREATE_FAILED"
	updateInProgress = "UPDATE_IN_PROGRESS"
	updateComplete   = "UPDATE_COMPLETE"
	updateFailed     = "UPDATE_FAILED"
	deleteInProgress = "DELETE_IN_PROGRESS"
	deleteFailed     = "DELETE_FAILED"
)

// Task states.
const (
	stateInProgress = "IN_PROGRESS"
	stateSuccess    = "SUCCESS"
	stateFail       = "FAIL"
)

// Node statuses.
const (
	nodeActive  = "ACTIVE"
	nodeShutoff = "SHUTOFF"
)

const (
	workerGroup  = "default-worker"
	masterNodes  = 3
	firstHostIdx = 10 // node addresses start at .10 of the fixed subnet
)

type cluster struct {
	uuid, name, projectID      string
	flavorID, keypair, stackID string
	templateID                 string
	status                     string
	statusReason               *string
	fixedNetwork, fixedSubnet  string
	apiAddress                 string // set when the create completes
	labels                     map[string]string
	createTimeout              int
	createdAt, updatedAt       time.Time
	groups                     []*nodegroup // default-master first
	acl                        ipacl
	events                     []*task
	nextHost                   int
}

type nodegroup struct {
	uuid, name, role     string
	flavorID, imageID    string
	stackID              string
	status               string
	statusReason         *string
	labels               map[string]string
	minNodes, maxNodes   *int
	nodes                []*node
	isDefault            bool
	createdAt, updatedAt time.Time
}

type node struct {
	uuid, name, address, status string
}

type ipacl struct {
	enable  bool
	action  string
	targets []ipaclTarget
}

type ipaclTarget struct {
	CIDRAddress string `json:"cidr_address"`
	Description string `json:"description,omitempty"`
}

// task is one task-history record and, while IN_PROGRESS, the pending
// transition it will apply when the simulated clock reaches due.
type task struct {
	id                        int
	uuid                      string
	cluster                   *cluster
	resUUID, resName, resType string
	typ, state                string
	contents                  *string
	createdAt, updatedAt      time.Time
	due                       time.Time
	failWith                  *string
	onSuccess                 func(now time.Time)
	onFail                    func(now time.Time, contents string)
}

// tick completes, in due order, every pending task whose time has come.
// It runs under s.mu at the start of every request, so transitions follow
// the simulated clock without background goroutines.
func (s *Service) tick() {
	now := s.env.Clock.Now()
	for {
		i := -1
		for j, t := range s.pending {
			if !t.due.After(now) && (i < 0 || t.due.Before(s.pending[i].due)) {
				i = j
			}
		}
		if i < 0 {
			return
		}
		t := s.pending[i]
		s.pending = slices.Delete(s.pending, i, i+1)
		t.updatedAt = t.due
		if t.failWith != nil {
			t.state, t.contents = stateFail, t.failWith
			if t.onFail != nil {
				t.onFail(t.due, *t.failWith)
			}
		} else {
			t.state = stateSuccess
			if t.onSuccess != nil {
				t.onSuccess(t.due)
			}
		}
	}
}

// begin records a task IN_PROGRESS for resource (a cluster or a node group
// of c) and schedules its end after the operation's duration. A matching
// fail-next rule makes it end in FAIL.
func (s *Service) begin(c *cluster, g *nodegroup, typ string, onSuccess func(time.Time), onFail func(time.Time, string)) *task {
	now := s.env.Clock.Now()
	s.taskSeq++
	t := &task{
		id: s.taskSeq, uuid: s.newUUID(), cluster: c, typ: typ, state: stateInProgress,
		createdAt: now, due: now.Add(s.duration(typ)), onSuccess: onSuccess, onFail: onFail,
	}
	if g != nil {
		t.resUUID, t.resName, t.resType = g.uuid, g.name, "nodegroup"
	} else {
		t.resUUID, t.resName, t.resType = c.uuid, c.name, "cluster"
	}
	if contents, ok := s.takeFailure(typ, c, g); ok {
		t.failWith = &contents
	}
	c.events = append(c.events, t)
	s.pending = append(s.pending, t)
	return t
}

func (s *Service) duration(typ string) time.Duration {
	if d, ok := s.durations[typ]; ok {
		return d
	}
	return time.Minute
}

// takeFailure consumes the first fail-next rule matching a new task; a
// rule still counting successes (After) lets the task succeed.
func (s *Service) takeFailure(typ string, c *cluster, g *nodegroup) (string, bool) {
	for i, f := range s.failNext {
		if !strings.EqualFold(f.Operation, typ) {
			continue
		}
		if f.Cluster != "" && f.Cluster != c.uuid && f.Cluster != c.name {
			continue
		}
		if f.Nodegroup != "" && (g == nil || (f.Nodegroup != g.uuid && f.Nodegroup != g.name)) {
			continue
		}
		if f.After > 0 {
			s.failNext[i].After--
			return "", false
		}
		s.failNext = slices.Delete(s.failNext, i, i+1)
		return f.Contents, true
	}
	return "", false
}

// inProgress reports whether a status is a *_IN_PROGRESS one.
func inProgress(status string) bool { return strings.HasSuffix(status, "_IN_PROGRESS") }

// clusterBusy returns an error when the cluster or any of its node groups
// has an operation in progress.
func clusterBusy(c *cluster) error {
	if inProgress(c.status) {
		return errorf(400, "Cluster %s already has an operation in progress (%s).", c.uuid, c.status)
	}
	for _, g := range c.groups {
		if inProgress(g.status) {
			return errorf(400, "Nodegroup %s of cluster %s already has an operation in progress (%s).", g.name, c.uuid, g.status)
		}
	}
	return nil
}

// groupBusy returns an error when the cluster or the node group has an
// operation in progress.
func groupBusy(c *cluster, g *nodegroup) error {
	if inProgress(c.status) {
		return errorf(400, "Cluster %s already has an operation in progress (%s).", c.uuid, c.status)
	}
	if inProgress(g.status) {
		return errorf(400, "Nodegroup %s already has an operation in progress (%s).", g.name, g.status)
	}
	return nil
}

func (s *Service) findCluster(idOrName string) (*cluster, error) {
	for _, c := range s.clusters {
		if c.uuid == idOrName {
			return c, nil
		}
	}
	for _, c := range s.clusters {
		if c.name == idOrName {
			return c, nil
		}
	}
	return nil, errorf(404, "Cluster %s could not be found.", idOrName)
}

func (c *cluster) findGroup(idOrName string) (*nodegroup, error) {
	for _, g := range c.groups {
		if g.uuid == idOrName {
			return g, nil
		}
	}
	for _, g := range c.groups {
		if g.name == idOrName {
			return g, nil
		}
	}
	return nil, errorf(404, "Nodegroup %s could not be found.", idOrName)
}

func (c *cluster) master() *nodegroup { return c.groups[0] }

func (c *cluster) workers() []*nodegroup { return c.groups[1:] }

// workerNodes counts the nodes of every worker group.
func (c *cluster) workerNodes() int {
	n := 0
	for _, g := range c.workers() {
		n += len(g.nodes)
	}
	return n
}

// addNodes adds n nodes to g with addresses from the cluster's subnet.
func (s *Service) addNodes(c *cluster, g *nodegroup, n int) {
	prefix := s.subnetCIDR(c.fixedSubnet)
	for range n {
		addr := prefix.Addr()
		for range c.nextHost {
			addr = addr.Next()
		}
		c.nextHost++
		idx := len(g.nodes)
		g.nodes = append(g.nodes, &node{
			uuid: s.newUUID(), name: fmt.Sprintf("%s-%s-node-%d", c.name, g.name, idx),
			address: addr.String(), status: nodeActive,
		})
	}
}

// subnetCIDR returns the address range of a VPC subnet (the simulator's
// table, else the network world's, else 192.168.0.0/24).
func (s *Service) subnetCIDR(subnet string) netip.Prefix {
	if p, ok := s.subnets[subnet]; ok {
		return p
	}
	if p, ok := s.worldCIDR(subnet); ok {
		return p
	}
	return netip.MustParsePrefix("192.168.0.0/24")
}

// setStatus moves the cluster or group to status, with a reason (nil: none).
func setClusterStatus(c *cluster, now time.Time, status string, reason *string) {
	c.status, c.statusReason, c.updatedAt = status, reason, now
}

func setGroupStatus(g *nodegroup, now time.Time, status string, reason *string) {
	g.status, g.statusReason, g.updatedAt = status, reason, now
}

func strptr(s string) *string { return &s }
