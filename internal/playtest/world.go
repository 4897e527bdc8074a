package playtest

import (
	"fmt"
	"maps"
	"mime"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/sim"
	"github.com/runbook/runbook/internal/sim/easymaker"
	"github.com/runbook/runbook/internal/sim/helpcenter"
	simnks "github.com/runbook/runbook/internal/sim/nks"
	"github.com/runbook/runbook/internal/sim/objectstorage"
)

// seedWorld puts the case's starting state into the simulators; a problem
// is reported at the position of the entry that caused it.
func seedWorld(srv *sim.Server, w World) []Failure {
	var out []Failure
	if w.NKS != nil {
		out = append(out, seedNKS(srv, w.NKS)...)
	}
	if w.HelpCenter != nil {
		out = append(out, seedHelpCenter(srv, w.HelpCenter)...)
	}
	if w.EasyMaker != nil {
		svc := srv.Service("easymaker").(*easymaker.Service)
		for _, name := range w.EasyMaker.Experiments {
			if _, err := svc.SeedExperiment(name, "seeded by the test"); err != nil {
				out = append(out, Failure{Message: err.Error()})
			}
		}
	}
	if len(w.Objects) > 0 {
		store := srv.Service("objectstorage").(*objectstorage.Service).Store()
		for _, o := range w.Objects {
			account, cont, name, err := splitObjectURI(o.URI)
			if err != nil {
				out = append(out, Failure{Pos: o.Pos, Message: err.Error()})
				continue
			}
			store.Put(account, cont, name, []byte(o.Text), mime.TypeByExtension(path.Ext(name)))
		}
	}
	return out
}

func seedNKS(srv *sim.Server, w *NKSWorld) []Failure {
	svc := srv.Service("nks").(*simnks.Service)
	for _, v := range slices.Sorted(maps.Keys(w.Versions)) {
		svc.SetVersion(v, w.Versions[v])
	}
	for typ, d := range w.Durations {
		svc.SetDuration(typ, d)
	}
	var out []Failure
	for _, c := range w.Clusters {
		sc := simnks.SeedCluster{Name: c.Name, Version: c.Version, NodeCount: c.NodeCount}
		for _, g := range c.NodeGroups {
			sc.NodeGroups = append(sc.NodeGroups, simnks.SeedNodeGroup(g))
		}
		if _, err := svc.Seed(sc); err != nil {
			out = append(out, Failure{Pos: c.Pos, Message: err.Error()})
		}
	}
	return out
}

func seedHelpCenter(srv *sim.Server, w *HelpCenterWorld) []Failure {
	svc := srv.Service("helpcenter").(*helpcenter.Service)
	svc.Reset(w.Generated)
	now := srv.Clock.Now()
	var out []Failure
	for _, n := range w.Notices {
		at := n.At
		if at.IsZero() {
			at = now.Add(-n.Age)
		}
		_, err := svc.SeedNotice(helpcenter.NewNotice{
			Title: n.Title, Content: n.Content, CategoryID: n.Category, Tags: n.Tags, IsTop: n.Top,
		}, at.Truncate(time.Second))
		if err != nil {
			out = append(out, Failure{Pos: n.Pos, Message: "seed notice: " + err.Error()})
		}
	}
	return out
}

// splitObjectURI splits obs://host/v1/AUTH_tenant/container/object.
func splitObjectURI(uri string) (account, container, object string, err error) {
	rest, ok := strings.CutPrefix(uri, "obs://")
	parts := strings.SplitN(rest, "/", 5)
	if !ok || len(parts) < 5 || parts[1] != "v1" || !strings.HasPrefix(parts[2], "AUTH_") || parts[3] == "" || parts[4] == "" {
		return "", "", "", fmt.Errorf("object URI %q: want obs://HOST/v1/AUTH_TENANT/CONTAINER/OBJECT", uri)
	}
	return parts[2], parts[3], parts[4], nil
}

// injectFaults adds the HTTP and task faults of a case.
func injectFaults(srv *sim.Server, k *sink, faults []Fault) {
	for _, f := range faults {
		switch {
		case f.HTTP != nil && f.HTTP.Service == SinkService:
			k.addFault(*f.HTTP)
		case f.HTTP != nil:
			h := f.HTTP
			srv.Faults.Add(sim.Fault{Service: h.Service, Method: h.Method, PathPrefix: h.Path, Status: h.Status,
				Latency: h.Latency, Count: h.Count, RetryAfter: h.RetryAfter})
		case f.Task != nil:
			t := f.Task
			contents := t.Contents
			if contents == "" {
				contents = t.Operation + " failed (injected by the test)"
			}
			svc := srv.Service("nks").(*simnks.Service)
			// The first rule waits for After successes; the ones after it
			// fail the tasks that follow at once.
			for i := range t.Times {
				after := 0
				if i == 0 {
					after = t.After
				}
				svc.FailNext(simnks.Failure{Operation: t.Operation, Cluster: t.Cluster, Nodegroup: t.NodeGroup, Contents: contents, After: after})
			}
		}
	}
}

// taskTypes are the cluster task types a task fault may name.
func taskTypes() []string {
	return slices.Sorted(maps.Keys(simnks.DefaultDurations))
}

// stepIDs lists every step id of pb: steps, on_failure and finally.
func stepIDs(pb *playbook.Playbook) []string {
	var ids []string
	for _, list := range [][]*playbook.Step{pb.Steps, pb.OnFailure, pb.Finally} {
		for _, s := range list {
			ids = append(ids, s.ID)
		}
	}
	return ids
}
