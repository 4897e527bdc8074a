package server

import (
	"context"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/metric"
	"github.com/runbook/runbook/internal/state"
)

// runbook_runs counts what this process saw: on replicas each counts the
// runs created through it since it started, by the status the store
// records for each (reconcile reads again those another replica
// executes), so their sum is not the database's. runbook_runs_unfinished is the database's view of the runs
// in flight, by status, exported by one replica only — the one leading
// the scheduler — so that a sum over the replicas' series counts each run
// once. It is read from the store at a scrape, at most every
// unfinishedRefresh; a server alone on its store (bbolt) exports none
// (its runbook_runs counts the whole store).

// unfinishedRefresh bounds how often a scrape reads the store.
const unfinishedRefresh = 5 * time.Second

// unfinishedStatuses are the label values of runbook_runs_unfinished.
var unfinishedStatuses = []state.RunStatus{state.RunPending, state.RunRunning, state.RunWaiting, state.RunSuspended}

// unfinishedRuns is the collector of runbook_runs_unfinished.
type unfinishedRuns struct {
	desc *metric.Desc

	mu      sync.Mutex
	leading func() bool // nil: not a replica
	count   func(context.Context) (map[state.RunStatus]int, error)
	at      time.Time
	last    map[state.RunStatus]int
}

func newUnfinishedRuns() *unfinishedRuns {
	return &unfinishedRuns{desc: metric.NewDesc("runbook_runs_unfinished",
		"Unfinished top-level runs in the whole database by status, whichever replica executes them; exported by the replica leading the scheduler only.",
		"status")}
}

// set makes the collector export the store's counts (count) while leading
// reports true.
func (u *unfinishedRuns) set(leading func() bool, count func(context.Context) (map[state.RunStatus]int, error)) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.leading, u.count = leading, count
}

// Collect implements metric.Collector: nothing unless this replica
// leads; the counts read at most unfinishedRefresh ago, else read now (a
// failed read keeps the last ones, or exports nothing).
func (u *unfinishedRuns) Collect(s *metric.Scrape) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.leading == nil || !u.leading() {
		return
	}
	if u.last == nil || time.Since(u.at) >= unfinishedRefresh {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		counts, err := u.count(ctx)
		cancel()
		if err == nil {
			u.last, u.at = counts, time.Now()
		}
	}
	if u.last == nil {
		return
	}
	for _, st := range unfinishedStatuses {
		s.Value(u.desc, float64(u.last[st]), string(st))
	}
}

// reconcile moves the runs a replica counts in runbook_runs as unfinished
// to the status the shared store records for them now: a run created
// through this replica may be executed, and ended, by another, whose
// events this one never sees. It reads the counted runs' statuses alone,
// in one statement however many runs the database holds; a run absent
// was deleted. It is run with the per-playbook read
// (metrics_playbooks.go).
func (m *metrics) reconcile(ctx context.Context, store state.StatusReader) error {
	m.mu.Lock()
	ids := make([]string, 0, len(m.status))
	for id := range m.status {
		ids = append(ids, id)
	}
	m.mu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	read, err := store.RunStatuses(ctx, ids)
	if err != nil {
		return err
	}
	m.recount(ids, read)
	return nil
}

// recount moves each counted run of ids to its status in now (absent:
// deleted, counted no more).
func (m *metrics) recount(ids []string, now map[string]state.RunStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		st := now[id]
		prev, ok := m.status[id]
		if !ok || prev == st {
			continue // it ended here meanwhile, or is as counted
		}
		m.addRuns(prev, -1)
		if st != "" {
			m.addRuns(st, 1)
		}
		if st == "" || st.Done() {
			delete(m.status, id)
		} else {
			m.status[id] = st
		}
	}
}
