package nks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/cloud/nks"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

// clusterUpgradeParams are the params of nks.cluster.upgrade.
type clusterUpgradeParams struct {
	Connection             string         `json:"connection" desc:"connection name (default nks)"`
	Cluster                string         `json:"cluster" required:"true" maxlen:"255" desc:"cluster name or UUID"`
	Version                string         `json:"version" required:"true" pattern:"^v(0|[1-9][0-9]*)[.](0|[1-9][0-9]*)[.](0|[1-9][0-9]*)$" like:"v1.28.3" desc:"target version like v1.31.4; must be marked supported by /v1/supports"`
	NodeGroups             []string       `json:"node_groups" desc:"worker node groups to upgrade, in this order (default: every worker group, by name); default-master always goes first"`
	WaitTimeout            steps.Duration `json:"wait_timeout" default:"2h" min:"1s" max:"72h" desc:"how long each node group's upgrade task may take"`
	NumBufferNodes         *int           `json:"num_buffer_nodes" min:"0" desc:"buffer nodes per worker group upgrade (service default 1)"`
	NumMaxUnavailableNodes *int           `json:"num_max_unavailable_nodes" min:"1" desc:"nodes a worker group upgrade may take down at once (service default 1)"`
}

// Group states of an ordered upgrade. A group goes pending -> called (the
// upgrade request may have been sent) -> waiting (the service answered;
// its task is awaited) -> done, or pending -> skipped when it already runs
// the version. A FAIL task makes it failed; the next attempt starts it
// again.
const (
	groupPending = "pending"
	groupCalled  = "called"
	groupWaiting = "waiting"
	groupDone    = "done"
	groupSkipped = "skipped"
	groupFailed  = "failed"
)

// upgradeCheckpoint is the one checkpoint of nks.cluster.upgrade: the
// version, the groups in upgrade order with their state and wait, so a
// restart never upgrades a group twice and keeps waiting on the same task.
type upgradeCheckpoint struct {
	Version     string         `json:"version"`
	ClusterUUID string         `json:"cluster_uuid"`
	Attempt     int            `json:"attempt"`
	Groups      []upgradeGroup `json:"groups"`
}

type upgradeGroup struct {
	Name  string `json:"name"`
	UUID  string `json:"uuid,omitempty"`
	State string `json:"state"`
	// Known lists the upgrade tasks of the cluster that existed before the
	// request, so the wait (and an adoption after a crash) picks this one.
	Known []string   `json:"known,omitempty"`
	Wait  *waitState `json:"wait,omitempty"`
	Task  string     `json:"task,omitempty"`
}

func init() {
	steps.Register(steps.Define(steps.Def[clusterUpgradeParams]{
		Type:      "nks.cluster.upgrade",
		Preflight: preflightClusterUpgrade,
		Summary: "Upgrade a cluster to a supported version: default-master first, then each worker group in turn, " +
			"each waited until its task succeeds; groups already at the version are skipped. Resumable mid-way.",
		Example: map[string]any{"cluster": "prod", "version": "v1.31.4", "node_groups": []any{"pool-a"}, "num_buffer_nodes": 1},
		Outputs: []steps.Output{
			{Name: "version", Type: "string", Description: "the version the cluster runs"},
			{Name: "upgraded", Type: "list", Description: "node groups upgraded, in order (default-master first)"},
			{Name: "skipped", Type: "list", Description: "node groups already at the version"},
			{Name: "tasks", Type: "map", Description: "node group name -> UUID of its NODEGROUP_UPGRADE task"},
		},
		Mutating: true,
		Run:      runClusterUpgrade,
		Check:    checkClusterUpgrade,
		Plan:     planClusterUpgrade,
	}))
}

func checkClusterUpgrade(p *clusterUpgradeParams, dynamic map[string]bool) []fault.Problem {
	var out []fault.Problem
	if dynamic["node_groups"] {
		return nil
	}
	seen := map[string]bool{}
	for i, g := range p.NodeGroups {
		path := fmt.Sprintf("node_groups[%d]", i)
		switch {
		case g == "":
			out = append(out, fault.Problem{Path: path, Message: "node group name is empty"})
		case seen[g]:
			out = append(out, fault.Problem{Path: path, Message: fmt.Sprintf("node group %s is listed twice", g)})
		}
		seen[g] = true
	}
	return out
}

func planClusterUpgrade(p *clusterUpgradeParams) []steps.PlannedCall {
	calls := []steps.PlannedCall{
		{Method: "GET", Path: nks.Path("supports"), Note: "the version must be marked supported"},
		{Method: "GET", Path: nks.Path("clusters", p.Cluster)},
		{Method: "GET", Path: nks.Path("clusters", p.Cluster, "nodegroups")},
		{Method: "POST", Path: nks.Path("clusters", p.Cluster, "nodegroups", nks.MasterNodeGroup, "upgrade"), Body: map[string]any{"version": p.Version},
			Note: "unless the master already runs the version; then wait for its NODEGROUP_UPGRADE task"},
	}
	body := map[string]any{"version": p.Version}
	if p.NumBufferNodes != nil {
		body["num_buffer_nodes"] = *p.NumBufferNodes
	}
	if p.NumMaxUnavailableNodes != nil {
		body["num_max_unavailable_nodes"] = *p.NumMaxUnavailableNodes
	}
	const note = "after the previous task succeeded, unless the group already runs the version"
	if len(p.NodeGroups) == 0 {
		// The worker groups are only known when the run lists them.
		return append(calls, steps.PlannedCall{Method: "POST", Body: body, Note: "each worker group in name order; " + note,
			Path: nks.Path("clusters", p.Cluster, "nodegroups") + "/{worker group}/upgrade"})
	}
	for _, g := range p.NodeGroups {
		if g == nks.MasterNodeGroup {
			continue
		}
		calls = append(calls, steps.PlannedCall{Method: "POST", Path: nks.Path("clusters", p.Cluster, "nodegroups", g, "upgrade"), Body: body, Note: note})
	}
	return calls
}

// upgradeRun is one attempt of nks.cluster.upgrade.
type upgradeRun struct {
	c  *steps.Call
	p  *clusterUpgradeParams
	cl *nks.Client
	cp upgradeCheckpoint
}

func runClusterUpgrade(ctx context.Context, c *steps.Call, p *clusterUpgradeParams) (steps.Outputs, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cl, err := clientFor(c, p.Connection)
	if err != nil {
		return nil, err
	}
	u := &upgradeRun{c: c, p: p, cl: cl}
	if _, err := c.LoadCheckpoint(&u.cp); err != nil {
		return nil, err
	}
	if u.cp.Groups == nil || u.cp.Version != p.Version {
		if err := u.plan(ctx); err != nil {
			return nil, err
		}
	} else if u.cp.Attempt != c.Attempt {
		// A new attempt: a failed group is started again, a wait gets a
		// new deadline (it keeps its task).
		u.cp.Attempt = c.Attempt
		for i := range u.cp.Groups {
			g := &u.cp.Groups[i]
			switch g.State {
			case groupFailed:
				g.State, g.Wait, g.Known = groupPending, nil, nil
			case groupWaiting:
				g.Wait.Deadline = c.Now().Add(p.WaitTimeout.Std())
			}
		}
		if err := u.save(ctx); err != nil {
			return nil, err
		}
	}
	for i := range u.cp.Groups {
		g := &u.cp.Groups[i]
		if g.State == groupPending || g.State == groupCalled || g.State == groupFailed {
			if err := u.start(ctx, g); err != nil {
				return nil, err
			}
		}
		if g.State == groupWaiting {
			if err := u.wait(ctx, g); err != nil {
				return nil, err
			}
		}
	}
	out := steps.Outputs{"version": p.Version, "upgraded": []any{}, "skipped": []any{}, "tasks": map[string]any{}}
	for _, g := range u.cp.Groups {
		switch g.State {
		case groupDone:
			out["upgraded"] = append(out["upgraded"].([]any), g.Name)
			out["tasks"].(map[string]any)[g.Name] = g.Task
		case groupSkipped:
			out["skipped"] = append(out["skipped"].([]any), g.Name)
		}
	}
	return out, nil
}

func (u *upgradeRun) save(ctx context.Context) error {
	return u.c.SaveCheckpoint(ctx, u.cp)
}

// plan checks the version against /v1/supports and every group against
// the ordering rules, before any change, and persists the upgrade order.
func (u *upgradeRun) plan(ctx context.Context) error {
	target := u.p.Version
	sup, err := u.cl.Supports(ctx)
	if err != nil {
		return fmt.Errorf("read supported versions: %w", err)
	}
	if err := nks.CheckSupportedVersion(target, sup.SupportedK8s); err != nil {
		return &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("%s: %v", u.c.StepID, err)}
	}
	cluster, err := u.cl.GetCluster(ctx, u.p.Cluster)
	if err != nil {
		return fmt.Errorf("read cluster %s: %w", u.p.Cluster, err)
	}
	var problems []string
	check := func(uc nks.UpgradeCheck) {
		if err := nks.CheckUpgrade(uc); err != nil && !errors.Is(err, nks.ErrAlreadyAtVersion) {
			problems = append(problems, err.Error())
		}
	}
	check(nks.UpgradeCheck{NodeGroup: nks.MasterNodeGroup, Target: target, MasterVersion: cluster.KubeTag(), GroupVersion: cluster.KubeTag()})
	list, err := u.cl.ListNodeGroups(ctx, cluster.UUID)
	if err != nil {
		return fmt.Errorf("list node groups of %s: %w", u.p.Cluster, err)
	}
	var workers []nks.NodeGroup
	for _, g := range list {
		if !g.IsMaster() {
			workers = append(workers, g)
		}
	}
	var order []nks.NodeGroup
	if len(u.p.NodeGroups) == 0 {
		slices.SortFunc(workers, func(a, b nks.NodeGroup) int { return strings.Compare(a.Name, b.Name) })
		order = workers
	} else {
		for _, name := range u.p.NodeGroups {
			if name == nks.MasterNodeGroup {
				continue // always first
			}
			i := slices.IndexFunc(workers, func(g nks.NodeGroup) bool { return g.Name == name || g.UUID == name })
			if i < 0 {
				names := make([]string, len(workers))
				for j, g := range workers {
					names[j] = g.Name
				}
				slices.Sort(names)
				return fault.Errorf(fault.NotFound, "%s: cluster %s has no worker node group %q (it has: %s)",
					u.c.StepID, u.p.Cluster, name, strings.Join(names, ", "))
			}
			order = append(order, workers[i])
		}
	}
	u.cp = upgradeCheckpoint{Version: target, ClusterUUID: cluster.UUID, Attempt: u.c.Attempt,
		Groups: []upgradeGroup{{Name: nks.MasterNodeGroup, State: groupPending}}}
	for _, g := range order {
		full, err := u.cl.GetNodeGroup(ctx, cluster.UUID, g.UUID)
		if err != nil {
			return fmt.Errorf("read node group %s: %w", g.Name, err)
		}
		// The master goes first, so each worker is checked against the target.
		check(nks.UpgradeCheck{NodeGroup: g.Name, Target: target, MasterVersion: target, GroupVersion: full.KubeTag()})
		u.cp.Groups = append(u.cp.Groups, upgradeGroup{Name: g.Name, UUID: g.UUID, State: groupPending})
	}
	if len(problems) > 0 {
		return &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("%s: cannot upgrade cluster %s to %s: %s",
			u.c.StepID, u.p.Cluster, target, strings.Join(problems, "; "))}
	}
	return u.save(ctx)
}

// groupNow is what the service says of a group right now.
type groupNow struct {
	uuid, version, status string
	masterVersion         string
}

// read reads a group's version and status. The master group cannot be
// read (403 on the real service): its version and status are the
// cluster's.
func (u *upgradeRun) read(ctx context.Context, g *upgradeGroup) (groupNow, error) {
	cluster, err := u.cl.GetCluster(ctx, u.cp.ClusterUUID)
	if err != nil {
		return groupNow{}, fmt.Errorf("read cluster %s: %w", u.p.Cluster, err)
	}
	if g.Name == nks.MasterNodeGroup {
		return groupNow{version: cluster.KubeTag(), status: cluster.Status, masterVersion: cluster.KubeTag()}, nil
	}
	ng, err := u.cl.GetNodeGroup(ctx, u.cp.ClusterUUID, g.Name)
	if err != nil {
		return groupNow{}, fmt.Errorf("read node group %s: %w", g.Name, err)
	}
	return groupNow{uuid: ng.UUID, version: ng.KubeTag(), status: ng.Status, masterVersion: cluster.KubeTag()}, nil
}

// start upgrades one group, or skips it when it already runs the version,
// or adopts an upgrade already sent by an attempt whose answer was lost.
func (u *upgradeRun) start(ctx context.Context, g *upgradeGroup) error {
	target := u.p.Version
	now, err := u.read(ctx, g)
	if err != nil {
		return err
	}
	if now.uuid != "" {
		g.UUID = now.uuid
	}
	if g.State == groupCalled {
		adopted, err := u.adopt(ctx, g, now)
		if err != nil || adopted {
			return err
		}
	}
	err = nks.CheckUpgrade(nks.UpgradeCheck{NodeGroup: g.Name, Target: target, MasterVersion: now.masterVersion, GroupVersion: now.version})
	switch {
	case errors.Is(err, nks.ErrAlreadyAtVersion):
		g.State = groupSkipped
		u.c.Log.Info("node group already at the version", "group", g.Name, "version", target)
		return u.save(ctx)
	case err != nil:
		return &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("%s: %v", u.c.StepID, err)}
	}
	if g.Known == nil {
		known, err := knownTasks(ctx, u.cl, u.cp.ClusterUUID, nks.EventNodeGroupUpgrade)
		if err != nil {
			return err
		}
		g.Known = known
	}
	g.State = groupCalled
	if err := u.save(ctx); err != nil {
		return err
	}
	req := nks.UpgradeRequest{Version: target}
	if g.Name != nks.MasterNodeGroup {
		req.NumBufferNodes, req.NumMaxUnavailableNodes = u.p.NumBufferNodes, u.p.NumMaxUnavailableNodes
	}
	u.c.Log.Info("upgrading node group", "group", g.Name, "from", now.version, "version", target)
	uuid, err := u.cl.UpgradeNodeGroup(ctx, u.cp.ClusterUUID, g.Name, req)
	if err != nil {
		if refused(err) {
			// The service refused: nothing was sent to adopt later.
			g.State = groupPending
			if serr := u.save(context.WithoutCancel(ctx)); serr != nil {
				return serr
			}
		}
		return fmt.Errorf("upgrade node group %s to %s: %w", g.Name, target, err)
	}
	g.UUID = uuid
	return u.await(ctx, g, "")
}

// adopt handles a group whose upgrade request may have been sent without
// its answer being recorded: an upgrade task newer than the known ones, an
// UPDATE_IN_PROGRESS status or the version already reached mean the
// request arrived, so its task is awaited instead of sending it again.
func (u *upgradeRun) adopt(ctx context.Context, g *upgradeGroup, now groupNow) (bool, error) {
	tasks, err := u.cl.ListTasks(ctx, u.cp.ClusterUUID)
	if err != nil {
		return false, fmt.Errorf("read task history of %s: %w", u.p.Cluster, err)
	}
	var fresh []nks.Task
	for _, t := range tasks {
		if !slices.Contains(g.Known, t.UUID) {
			fresh = append(fresh, t)
		}
	}
	resource := g.UUID
	if g.Name == nks.MasterNodeGroup {
		resource = "" // unknown: the master group cannot be read
	}
	task := nks.NewestTask(fresh, resource, nks.EventNodeGroupUpgrade, time.Time{})
	switch {
	case task != nil:
		if g.UUID == "" {
			g.UUID = task.ResourceUUID
		}
		u.c.Log.Info("adopting the upgrade sent before the interruption", "group", g.Name, "task", task.UUID)
		return true, u.await(ctx, g, task.UUID)
	case strings.HasSuffix(now.status, "_IN_PROGRESS"):
		u.c.Log.Info("adopting the upgrade in progress", "group", g.Name, "status", now.status)
		return true, u.await(ctx, g, "")
	}
	return false, nil
}

// await records that the group's upgrade was accepted and what its wait
// looks for (taskUUID when already known).
func (u *upgradeRun) await(ctx context.Context, g *upgradeGroup, taskUUID string) error {
	g.State = groupWaiting
	g.Wait = &waitState{ClusterUUID: u.cp.ClusterUUID, ResourceUUID: g.UUID, EventType: nks.EventNodeGroupUpgrade,
		Known: g.Known, TaskUUID: taskUUID, Deadline: u.c.Now().Add(u.p.WaitTimeout.Std())}
	return u.save(context.WithoutCancel(ctx))
}

// wait waits for the group's upgrade task.
func (u *upgradeRun) wait(ctx context.Context, g *upgradeGroup) error {
	task, err := waitTask(ctx, u.c, u.cl, g.Wait, func() error { return u.save(ctx) })
	if err != nil {
		var se *fault.Error
		if errors.As(err, &se) && se.Code == fault.Failed {
			g.State = groupFailed
			if id, _ := se.Data["task_uuid"].(string); id != "" {
				g.Task = id
			}
			if serr := u.save(context.WithoutCancel(ctx)); serr != nil {
				return serr
			}
			data := map[string]any{"node_group": g.Name, "version": u.p.Version}
			for k, v := range se.Data {
				data[k] = v
			}
			return &fault.Error{Code: fault.Failed, Message: fmt.Sprintf("upgrade of node group %s to %s", g.Name, u.p.Version),
				Data: data, Err: err}
		}
		return fmt.Errorf("wait for the upgrade of node group %s: %w", g.Name, err)
	}
	g.State, g.Task = groupDone, task.UUID
	u.c.Log.Info("node group upgraded", "group", g.Name, "version", u.p.Version, "task", task.UUID)
	return u.save(context.WithoutCancel(ctx))
}

// refused reports whether a mutating call's error proves the service
// refused it (nothing happened).
func refused(err error) bool {
	switch fault.CodeOf(err) {
	case fault.Invalid, fault.NotFound, fault.Conflict, fault.Unauthorized, fault.InProgress, fault.Throttled:
		return true
	}
	return false
}
