package server

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/metric"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/trigger"
)

// The per-playbook series say what the store knows, so that a restart
// does not reset them and every replica of a shared store exports the
// same values (aggregate them with max, not sum): the end of the last
// run of each loaded playbook that succeeded and that failed, and the
// approvals waiting, and the schedule pauses. They are read from the store at a scrape, at most
// every storeRefresh or so (a failed read keeps the values of the last one and
// is tried again at the next scrape),
// and a run that ends in this process moves its playbook's time at once.
// The schedule series are computed from the playbooks' cron expressions
// at each scrape, on a server that fires schedules. Every loaded playbook
// has its series from the start: a time of 0 means never.

// storeRefresh bounds how often a scrape reads the store: at most every
// storeRefresh, or ten times as long as the last read took when that is
// longer (thousands of runs waiting, a slow database), so the read never
// takes more than a tenth of the store's time.
const storeRefresh = 10 * time.Second

// scheduleHorizon and maxSlots bound the slots runbook_schedule_interval_seconds
// looks at: those of the next 8 days and the first after them (at least
// two), at most 1000.
const (
	scheduleHorizon = 8 * 24 * time.Hour
	maxSlots        = 1000
)

// lastEnds is when a playbook's last succeeded and last failed run ended.
type lastEnds struct{ succeeded, failed time.Time }

// later returns the later of each time of e and o.
func (e lastEnds) later(o lastEnds) lastEnds {
	if o.succeeded.After(e.succeeded) {
		e.succeeded = o.succeeded
	}
	if o.failed.After(e.failed) {
		e.failed = o.failed
	}
	return e
}

// waitingApprovals counts a playbook's approval steps waiting for an
// answer and when the oldest began to wait.
type waitingApprovals struct {
	n      int
	oldest time.Time
}

// playbookView is the collector of the per-playbook series.
type playbookView struct {
	src playbookSource
	// reconcile, set on a replica, corrects runbook_runs from the store
	// at each read (metrics_cluster.go).
	reconcile                                  func(context.Context) error
	lastSuccess, lastFailure, waiting, waitAge *metric.Desc
	nextFire, interval, paused                 *metric.Desc

	reading   sync.Mutex // one store read at a time
	mu        sync.Mutex
	at        time.Time           // of the last store read
	took      time.Duration       // how long it took
	read      map[string]lastEnds // by playbook, from the store
	local     map[string]lastEnds // by playbook label, ended here
	approvals map[string]waitingApprovals
	pauses    map[string][]state.SchedulePause // by playbook
}

func newPlaybookView(src playbookSource) *playbookView {
	pb := []string{"playbook"}
	return &playbookView{
		src: src,
		lastSuccess: metric.NewDesc("runbook_playbook_last_success_timestamp_seconds",
			"When the last run of the playbook that succeeded ended (Unix seconds; 0: never), as the store records it.", pb...),
		lastFailure: metric.NewDesc("runbook_playbook_last_failure_timestamp_seconds",
			"When the last run of the playbook that failed ended (Unix seconds; 0: never), as the store records it.", pb...),
		waiting: metric.NewDesc("runbook_approvals_waiting",
			"Approval steps waiting for an answer, by playbook, as the store records them.", pb...),
		waitAge: metric.NewDesc("runbook_approvals_oldest_waiting_seconds",
			"How long the oldest approval step of the playbook waiting for an answer has waited (0: none waits).", pb...),
		nextFire: metric.NewDesc("runbook_schedule_next_fire_timestamp_seconds",
			"The next slot of a schedule trigger (Unix seconds, before its jitter), by playbook and trigger (its index among the playbook's triggers).", "playbook", "trigger"),
		interval: metric.NewDesc("runbook_schedule_interval_seconds",
			"The longest time between two consecutive slots of a schedule trigger among those of the next 8 days and the first after them, by playbook and trigger.", "playbook", "trigger"),
		paused: metric.NewDesc("runbook_schedule_paused",
			"1 while a schedule trigger is paused (runbook schedule pause), else 0, as the store records it, by playbook and trigger.", "playbook", "trigger"),
		read: map[string]lastEnds{}, local: map[string]lastEnds{}, approvals: map[string]waitingApprovals{},
	}
}

// ended notes a run of the playbook labelled pb that ended here.
func (v *playbookView) ended(pb string, st state.RunStatus, at time.Time) {
	var e lastEnds
	switch st {
	case state.RunSucceeded:
		e.succeeded = at
	case state.RunFailed:
		e.failed = at
	default:
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.local[pb] = v.local[pb].later(e)
}

// Collect implements metric.Collector.
func (v *playbookView) Collect(s *metric.Scrape) {
	v.mu.Lock()
	defer v.mu.Unlock()
	pbs := v.src.playbooks()
	now := time.Now()
	gauge := s.Value
	for _, pb := range pbs {
		e := v.read[pb.Name].later(v.local[pb.Name])
		gauge(v.lastSuccess, unixSeconds(e.succeeded), pb.Name)
		gauge(v.lastFailure, unixSeconds(e.failed), pb.Name)
		v.collectApprovals(gauge, pb.Name, now)
		if v.src.schedules {
			v.collectSchedules(gauge, pb, now)
		}
	}
	if a := v.approvals[otherPlaybook]; a.n > 0 {
		v.collectApprovals(gauge, otherPlaybook, now)
	}
}

func (v *playbookView) collectApprovals(gauge func(*metric.Desc, float64, ...string), pb string, now time.Time) {
	a := v.approvals[pb]
	gauge(v.waiting, float64(a.n), pb)
	age := 0.0
	if a.n > 0 {
		age = max(now.Sub(a.oldest).Seconds(), 0)
	}
	gauge(v.waitAge, age, pb)
}

// collectSchedules gives the next slot, the longest interval and whether
// it is paused of each schedule trigger of pb.
func (v *playbookView) collectSchedules(gauge func(*metric.Desc, float64, ...string), pb *playbook.Playbook, now time.Time) {
	for i, t := range pb.Triggers {
		if t.Schedule == nil {
			continue
		}
		idx := strconv.Itoa(i)
		paused := 0.0
		for _, p := range v.pauses[pb.Name] {
			if p.Covers(i) {
				paused = 1
			}
		}
		gauge(v.paused, paused, pb.Name, idx)
		slots, err := scheduleSlots(t.Schedule, now)
		if err != nil || len(slots) == 0 {
			continue
		}
		gauge(v.nextFire, unixSeconds(slots[0]), pb.Name, idx)
		longest := time.Duration(0)
		for j := 1; j < len(slots); j++ {
			longest = max(longest, slots[j].Sub(slots[j-1]))
		}
		if longest > 0 {
			gauge(v.interval, longest.Seconds(), pb.Name, idx)
		}
	}
}

// scheduleSlots returns the next slots of sch after now: those of the
// next scheduleHorizon and the first after it (at least two), at most
// maxSlots, computed 32 at a time.
func scheduleSlots(sch *playbook.Schedule, now time.Time) ([]time.Time, error) {
	const chunk = 32
	var out []time.Time
	from := now
	for {
		more, err := trigger.NextSlots(sch, from, chunk)
		if err != nil {
			return nil, err
		}
		for _, slot := range more {
			out = append(out, slot)
			if len(out) >= 2 && slot.Sub(now) > scheduleHorizon || len(out) == maxSlots {
				return out, nil
			}
		}
		if len(more) < chunk { // the schedule has no more slots
			return out, nil
		}
		from = more[len(more)-1]
	}
}

// refreshIfDue reads the store when the last read is storeRefresh old;
// on an error it keeps what it had. The reads hold no lock the engine's
// events wait for.
func (v *playbookView) refreshIfDue() {
	v.reading.Lock()
	defer v.reading.Unlock()
	v.mu.Lock()
	due := v.src.store != nil && time.Since(v.at) >= max(storeRefresh, 10*v.took)
	v.mu.Unlock()
	if !due {
		return
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pbs := v.src.playbooks()
	read := make(map[string]lastEnds, len(pbs))
	for _, pb := range pbs {
		var e lastEnds
		var err error
		if e.succeeded, err = lastEnded(ctx, v.src.store, pb.Name, state.RunSucceeded); err != nil {
			return
		}
		if e.failed, err = lastEnded(ctx, v.src.store, pb.Name, state.RunFailed); err != nil {
			return
		}
		read[pb.Name] = e
	}
	approvals, err := v.waitingApprovals(ctx)
	if err != nil {
		return
	}
	pauseList, err := v.src.store.SchedulePauses(ctx, "")
	if err != nil {
		return
	}
	pauses := map[string][]state.SchedulePause{}
	for _, p := range pauseList {
		pauses[p.Playbook] = append(pauses[p.Playbook], p)
	}
	if v.reconcile != nil && v.reconcile(ctx) != nil {
		return
	}
	v.mu.Lock()
	v.read, v.approvals, v.pauses, v.at, v.took = read, approvals, pauses, time.Now(), time.Since(began)
	v.mu.Unlock()
}

// lastEnded is when the newest run of playbook name with status st
// ended (zero: there is none).
func lastEnded(ctx context.Context, store state.Store, name string, st state.RunStatus) (time.Time, error) {
	runs, err := store.ListRuns(ctx, state.RunFilter{Playbook: name, Status: []state.RunStatus{st}, Limit: 1})
	if err != nil || len(runs) == 0 {
		return time.Time{}, err
	}
	return runs[0].EndedAt, nil
}

// waitingApprovals counts the approval steps waiting for an answer, by
// playbook label: the steps of every waiting run that wait with an
// approval's question.
func (v *playbookView) waitingApprovals(ctx context.Context) (map[string]waitingApprovals, error) {
	runs, err := v.src.store.ListRuns(ctx, state.RunFilter{Status: []state.RunStatus{state.RunWaiting}})
	if err != nil {
		return nil, err
	}
	out := map[string]waitingApprovals{}
	for _, r := range runs {
		recs, err := v.src.store.Steps(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		label := otherPlaybook
		if v.src.known != nil && v.src.known(r.Playbook) {
			label = r.Playbook
		}
		for _, rec := range recs {
			if rec.Status != state.StepWaiting || rec.Approval == nil {
				continue
			}
			a := out[label]
			a.n++
			if since := rec.StartedAt; a.oldest.IsZero() || since.Before(a.oldest) {
				a.oldest = since
			}
			out[label] = a
		}
	}
	return out, nil
}

// unixSeconds is t in Unix seconds, 0 for the zero time.
func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}
