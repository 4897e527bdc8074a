package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
)

// The replicas' lease in the crash test: short, so that a takeover is
// quick; the bound checked is takeoverBound. (A replica takes runs over only
// into free execution slots: max_running is set high enough in the test
// that the survivors always have some, so the bound measures the
// takeover, not the capacity.)
const replicaLease = 2 * time.Second

// takeoverBound bounds how long after a replica's kill its runs resume
// elsewhere: the database keeps a replica's lease a lease and a half after
// its last renewal (the lease and its grace, runner.leaseGrace), plus 2 s
// for the last renewal's age, the queue's poll and the resume.
const takeoverBound = replicaLease*3/2 + 2*time.Second

// resumeFloor is the pace, in runs a second, below which the survivors
// must not resume a dead replica's runs once the takeover began: each
// run's record is read and its execution restarted. A kill under the
// soak's load can leave a thousand runs unfinished; this 2-core machine
// resumed about 280 a second with nothing else running.
const resumeFloor = 100

// tickPlaybook fires every second; every slot must start exactly one run.
const tickPlaybook = `version: 1
name: tick
triggers:
  - schedule: {cron: "* * * * * *", catchup: all, catchup_window: 10m, overlap: allow}
steps:
  - {id: tick, uses: log, with: {message: "slot ${{ trigger.slot }}"}}
`

// growPlaybook creates a cluster once approved; the simulator's journal
// must show one create per cluster name, whichever replicas executed it.
const growPlaybook = `version: 1
name: grow
inputs:
  name: {type: string}
steps:
  - id: gate
    uses: approval
    with: {message: "create ${{ inputs.name }}?"}
  - id: create
    uses: nks.cluster.create
    with:
      name: ${{ inputs.name }}` + nksCreateWith + `
`

// replicaSet is n `runbook serve` processes on one database, each on its
// own loopback port.
type replicaSet struct {
	c    *cli
	args []string
	mu   sync.Mutex
	proc []*serveProc
	host string
}

func (rs *replicaSet) start(i int) {
	s := rs.c.serve(rs.args...)
	rs.mu.Lock()
	rs.proc[i] = s
	rs.mu.Unlock()
}

// logAbout logs, for each unfinished run of runs, whether its owner was
// killed and what the live replicas' logs say of it: what a stranded run
// needs to be understood.
func (rs *replicaSet) logAbout(t *testing.T, st state.Store, runs []*state.Run, kills []killRecord) {
	t.Helper()
	for _, r := range runs {
		if r.Status.Done() {
			continue
		}
		for _, k := range kills {
			if strings.HasPrefix(r.Owner, k.owner+"@") || r.Owner == k.owner {
				t.Logf("run %s: its owner %s was killed at %s", r.ID, r.Owner, k.at.Format(time.RFC3339Nano))
			}
		}
		rs.logRun(t, st, r.ID)
	}
}

// logRun logs run id's events and steps and the replicas' log lines that
// name it, whatever its status.
func (rs *replicaSet) logRun(t *testing.T, st state.Store, id string) {
	t.Helper()
	evs, _ := st.Events(context.Background(), id, 0, 0)
	for _, ev := range evs {
		t.Logf("run %s event %d %s %s %s: %s", id, ev.Seq, ev.Time.Format(time.RFC3339Nano), ev.Type, ev.Step, ev.Message)
	}
	if recs, err := st.Steps(context.Background(), id); err == nil {
		for _, rec := range recs {
			t.Logf("run %s step %s %s attempt %d", id, rec.ID, rec.Status, rec.Attempts)
		}
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for i, s := range rs.proc {
		if s == nil {
			continue
		}
		for line := range strings.Lines(s.stderrText()) {
			if strings.Contains(line, id) {
				t.Logf("replica %d (pid %d): %s", i, s.cmd.Process.Pid, strings.TrimSpace(line))
			}
		}
	}
}

// url is replica i's address, "" while it is down.
func (rs *replicaSet) url(i int) string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	s := rs.proc[i]
	if s == nil {
		return ""
	}
	select {
	case <-s.done:
		return ""
	default:
		return s.url
	}
}

// kill kills replica i with SIGKILL and returns its host/pid (the owner of
// its runs is that, with "@start" on Linux).
func (rs *replicaSet) kill(i int) string {
	rs.mu.Lock()
	s := rs.proc[i]
	rs.proc[i] = nil
	rs.mu.Unlock()
	id := fmt.Sprintf("%s/%d", rs.host, s.cmd.Process.Pid)
	s.kill()
	return id
}

// call sends an API request to the replica at url; a goroutine's helper
// (no require).
func call(client *http.Client, method, url string, body any) (int, map[string]any, error) {
	return callKeyed(client, method, url, body, "")
}

// callKeyed is call with an Idempotency-Key (none when empty): a start
// sent again after its answer was lost (a replica killed before it
// replied) answers the run the first one started.
func callKeyed(client *http.Client, method, url string, body any, key string) (int, map[string]any, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+serveToken)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var m map[string]any
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m, nil
}

// ownedRuns lists the unfinished top-level runs the replica owner has
// claimed (the owner column the queue sets; the record's owner changes
// only when the run resumes).
func ownedRuns(t *testing.T, db *pgx.Conn, owner string) []string {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT id FROM runbook_runs
		WHERE (owner = $1 OR owner LIKE $1 || '@%') AND parent_id = '' AND status IN ('pending', 'running', 'waiting', 'suspended')`, owner)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return ids
}

// columnOwner is the replica that claimed run id (the queue's owner
// column), for a failure message.
func columnOwner(db *pgx.Conn, id string) string {
	var owner string
	if err := db.QueryRow(context.Background(), `SELECT owner FROM runbook_runs WHERE id = $1`, id).Scan(&owner); err != nil {
		return err.Error()
	}
	return owner
}

// killRecord is one kill: when, whose runs were unfinished then.
type killRecord struct {
	at    time.Time
	owner string
	runs  []string
}

// crashReplicas runs three replicas on one database under webhook load
// from senders, a schedule every second and approvals answered on another
// replica than the one that started the run, kills a random replica kills
// times at random moments (restarting it), then checks: every
// acknowledged hook has exactly one run, every slot of the schedule's
// window one run, every run a final status, every cluster one create in
// the simulator's journal, and every run the killed replica owned resumed
// elsewhere within takeoverBound. It returns the takeover delays.
func crashReplicas(t *testing.T, senders, deliveries, approvals, kills int, pace time.Duration) []time.Duration {
	c := newCLI(t)
	dsn := onDatabase(t, c)
	sim := c.startSimAt("100", map[string]string{"CLUSTER_CREATE": "150s"}) // 1.5 s of real time
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	src, err := os.ReadFile(filepath.Join("..", "..", "playbooks", "sms-unsubscribe.yaml"))
	require.NoError(t, err)
	c.file("playbooks/sms-unsubscribe.yaml", string(src))
	c.file("playbooks/tick.yaml", tickPlaybook)
	c.file("playbooks/grow.yaml", growPlaybook)
	c.file("runbook.yaml", fmt.Sprintf("server: {max_body: 1MiB, lease: %s, max_running: 1000}\nschedules: true\nwebhooks:\n  routes:\n    sms: {secret: SMS_WEBHOOK_SECRET}\n", replicaLease))
	supp := filepath.Join(c.dir, "suppression.txt")
	c.env = append(c.env, "SMS_WEBHOOK_SECRET=hook-secret", "SMS_SUPPRESSION_FILE="+supp, "RUNBOOK_FILE_ROOTS="+c.dir)

	host, err := os.Hostname()
	require.NoError(t, err)
	rs := &replicaSet{c: c, args: []string{"-v", "--playbooks", filepath.Join(c.dir, "playbooks"), "--sim-url", sim}, proc: make([]*serveProc, 3), host: host}
	for i := range 3 {
		rs.start(i)
	}
	st, err := postgres.Open(context.Background(), dsn, postgres.Options{})
	require.NoError(t, err)
	defer st.Close()

	db, err := pgx.Connect(context.Background(), dsn)
	require.NoError(t, err)
	defer db.Close(context.Background())

	client := &http.Client{Timeout: 10 * time.Second}
	var failures sync.Map // problems seen by the goroutines
	fail := func(format string, args ...any) { failures.Store(fmt.Sprintf(format, args...), true) }

	// Senders: each delivery goes to a replica picked by the sender and,
	// when not answered 200, to the next one, until one acknowledges it.
	queue := make(chan delivery)
	var acked sync.Map // hook ID -> true
	var nAcked atomic.Int64
	var load sync.WaitGroup
	for w := range senders {
		load.Go(func() {
			for d := range queue {
				for attempt := 0; ; attempt++ {
					if attempt > 200 {
						fail("delivery %s never acknowledged", d.id)
						break
					}
					u := rs.url((w + attempt) % 3)
					if u == "" {
						continue
					}
					if (&serveProc{url: u}).post(client, d, "hook-secret") == http.StatusOK {
						for _, h := range d.hooks {
							acked.Store(h, true)
						}
						nAcked.Add(1)
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		})
	}
	go func() {
		for _, d := range makeDeliveries(deliveries) {
			queue <- d
			time.Sleep(pace)
		}
		close(queue)
	}()

	// Approvals: start a grow run on one replica, answer it on another.
	var grown sync.Map // cluster name -> run ID
	for a := range approvals {
		load.Go(func() {
			time.Sleep(time.Duration(a) * 700 * time.Millisecond)
			name := fmt.Sprintf("pool-%02d", a)
			var id string
			for attempt := 0; id == ""; attempt++ {
				if attempt > 200 {
					fail("grow %s never started", name)
					return
				}
				if u := rs.url((a + attempt) % 3); u != "" {
					// Keyed: a start sent again after a replica was
					// killed before it answered starts no second run.
					code, m, err := callKeyed(client, "POST", u+"/api/v1/playbooks/grow/runs", map[string]any{"inputs": map[string]any{"name": name}}, "grow-"+name)
					if err == nil && (code == http.StatusCreated || code == http.StatusOK) {
						id, _ = m["id"].(string)
						grown.Store(name, id)
						break
					}
				}
				time.Sleep(50 * time.Millisecond)
			}
			time.Sleep(time.Duration(1000+a%4*700) * time.Millisecond) // the run waits meanwhile
			var last string
			for attempt := 0; ; attempt++ {
				if attempt > 400 {
					fail("run %s never approved; last answer: %s", id, last)
					return
				}
				if u := rs.url((a + 1 + attempt) % 3); u != "" {
					code, m, err := call(client, "POST", u+"/api/v1/runs/"+id+"/approve", map[string]any{"approve": true, "step": "gate", "by": "alice"})
					if err == nil && code == http.StatusOK {
						return
					}
					last = fmt.Sprint(code, m, err)
					// An answer recorded by a replica killed before it
					// replied: the retry finds the step answered, or
					// gone on past the approval.
					if code == http.StatusConflict {
						if a, err := st.GetApproval(context.Background(), id, "gate"); err == nil && a.Approved && !a.Pending {
							return
						}
					}
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}

	// Kills, at random moments, each replica restarted a moment later.
	var killsDone []killRecord
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 14))
	for range kills {
		time.Sleep(time.Duration(1000+rnd.IntN(1500)) * time.Millisecond)
		i := rnd.IntN(3)
		for rs.url(i) == "" {
			i = (i + 1) % 3
		}
		owner := rs.kill(i)
		at := time.Now()
		k := killRecord{at: at, owner: owner}
		k.runs = ownedRuns(t, db, owner)
		killsDone = append(killsDone, k)
		time.Sleep(time.Duration(300+rnd.IntN(700)) * time.Millisecond)
		rs.start(i)
	}
	load.Wait()
	failures.Range(func(k, _ any) bool { t.Error(k); return true })

	// The schedule fires again after the last kill (which may have hit
	// the leader: the next one leads once its lease expired).
	if n := len(killsDone); n > 0 {
		after := killsDone[n-1].at
		require.Eventually(t, func() bool {
			ticks, err := st.ListRuns(context.Background(), state.RunFilter{Playbook: "tick", Limit: 1})
			if err != nil || len(ticks) == 0 {
				return false
			}
			slot, err := time.Parse(time.RFC3339, fmt.Sprint(ticks[0].Trigger["slot"]))
			return err == nil && slot.After(after)
		}, 3*replicaLease+5*time.Second, 100*time.Millisecond, "a slot after the last kill fires")
	}

	// Every run ends.
	deadline := time.Now().Add(30 * time.Second)
	var runs []*state.Run
	for {
		runs, err = st.ListRuns(context.Background(), state.RunFilter{})
		require.NoError(t, err)
		var open []string
		for _, r := range runs {
			if !r.Status.Done() {
				open = append(open, fmt.Sprintf("%s (%s, %s, owner %s, claimed by %s)", r.ID, r.Playbook, r.Status, r.Owner, columnOwner(db, r.ID)))
			}
		}
		if len(open) == 0 {
			break
		}
		if !time.Now().Before(deadline) {
			rs.logAbout(t, st, runs, killsDone)
		}
		require.True(t, time.Now().Before(deadline), "%d runs unfinished: %v", len(open), open)
		time.Sleep(200 * time.Millisecond)
	}
	settled := time.Now()
	for i := range 3 {
		rs.mu.Lock()
		s := rs.proc[i]
		rs.mu.Unlock()
		s.stop(t)
	}
	runs, err = st.ListRuns(context.Background(), state.RunFilter{})
	require.NoError(t, err)

	// One run per acknowledged hook; every hook's number in the file once.
	perHook := map[string]int{}
	var slots []string
	for _, r := range runs {
		// A slot that fired while the replicas stopped leaves its run
		// pending, for the next start: every other run has ended.
		if !(r.Playbook == "tick" && r.CreatedAt.After(settled)) {
			assert.True(t, r.Status.Done(), "run %s is %s", r.ID, r.Status)
		}
		switch r.Playbook {
		case "sms-unsubscribe":
			perHook[fmt.Sprint(r.Inputs["hook_id"])]++
			assert.Equal(t, state.RunSucceeded, r.Status, "run %s", r.ID)
		case "tick":
			slots = append(slots, fmt.Sprint(r.Trigger["slot"]))
		case "grow":
			assert.Equal(t, state.RunSucceeded, r.Status, "grow run %s", r.ID)
		}
	}
	hooks := 0
	acked.Range(func(k, _ any) bool {
		hooks++
		assert.Equal(t, 1, perHook[k.(string)], "runs of acknowledged hook %s", k)
		return true
	})
	assert.Len(t, perHook, hooks, "no run for a hook never acknowledged")
	assert.Equal(t, int64(deliveries), nAcked.Load())
	b, err := os.ReadFile(supp)
	require.NoError(t, err)
	seen := map[string]int{}
	for _, l := range strings.Fields(string(b)) {
		seen[l]++
	}
	for n, k := range seen {
		assert.Equal(t, 1, k, "number %s suppressed %d times", n, k)
	}
	assert.Len(t, seen, hooks)

	// Every second of the schedule's window fired once.
	require.NotEmpty(t, slots)
	sort.Strings(slots)
	first, err := time.Parse(time.RFC3339, slots[0])
	require.NoError(t, err)
	last, err := time.Parse(time.RFC3339, slots[len(slots)-1])
	require.NoError(t, err)
	var want []string
	for s := first; !s.After(last); s = s.Add(time.Second) {
		want = append(want, s.In(first.Location()).Format(time.RFC3339))
	}
	assert.Equal(t, want, slots, "each slot of the window once")
	if n := len(killsDone); n > 0 {
		assert.True(t, last.After(killsDone[n-1].at), "the schedule fired after the last kill (last slot %s)", last)
	}

	// One create per cluster in the simulator's journal.
	creates := map[string]int{}
	for _, body := range simCreates(t, sim) {
		name, _ := body["name"].(string)
		creates[name]++
	}
	grown.Range(func(k, _ any) bool {
		assert.Equal(t, 1, creates[k.(string)], "creates of cluster %s", k)
		return true
	})

	t.Logf("%d hooks acknowledged, %d slots fired (%s .. %s), %d clusters created, runs unfinished at each kill: %v",
		hooks, len(slots), slots[0], slots[len(slots)-1], len(creates), unfinishedAtKills(killsDone))

	// The runs of a killed replica resumed elsewhere within takeoverBound.
	var delays []time.Duration
	for _, k := range killsDone {
		type resumed struct {
			id string
			d  time.Duration
		}
		var mine []resumed
		for _, id := range k.runs {
			evs, err := st.Events(context.Background(), id, 0, 0)
			require.NoError(t, err)
			i := slices.IndexFunc(evs, func(ev state.Event) bool { return ev.Type == "run.resumed" && ev.Time.After(k.at) })
			if i < 0 {
				// It ended without resuming (it had finished its last step).
				continue
			}
			d := evs[i].Time.Sub(k.at)
			// A replica killed after it took the run over and before it
			// resumed it hands the run on again: the bound counts from
			// that kill.
			for _, later := range killsDone {
				if later.at.After(k.at) && later.at.Before(evs[i].Time) && later.at.Sub(k.at) > 0 {
					if d2 := evs[i].Time.Sub(later.at); d2 < d && slices.Contains(later.runs, id) {
						d = d2
					}
				}
			}
			delays = append(delays, d)
			mine = append(mine, resumed{id, d})
		}
		if len(mine) == 0 {
			continue
		}
		// The takeover begins within takeoverBound; the survivors then
		// resume the dead replica's runs one after another, at
		// resumeFloor a second or faster: the n-th within n/resumeFloor
		// more.
		slices.SortFunc(mine, func(a, b resumed) int { return cmp.Compare(a.d, b.d) })
		t.Logf("kill of %s: %d runs resumed elsewhere, the first after %s, the last after %s", k.owner, len(mine),
			mine[0].d.Round(time.Millisecond), mine[len(mine)-1].d.Round(time.Millisecond))
		for n, r := range mine {
			bound := takeoverBound + time.Duration(n)*time.Second/resumeFloor
			assert.LessOrEqual(t, r.d, bound, "run %s of killed replica %s (%d of %d) resumed after %s (kills at %s)",
				r.id, k.owner, n+1, len(mine), r.d, killOffsets(killsDone, k.at))
		}
	}
	return delays
}

// TestReplicasKilledUnderLoad is the short version (crash test of issue
// 14): three replicas, 4 senders, 3 kills. The soak (replicas_soak_test.go)
// runs 32 senders and 10 kills.
func TestReplicasKilledUnderLoad(t *testing.T) {
	delays := crashReplicas(t, 4, 150, 8, 3, 40*time.Millisecond)
	logDelays(t, delays)
}

func unfinishedAtKills(ks []killRecord) []int {
	out := make([]int, len(ks))
	for i, k := range ks {
		out[i] = len(k.runs)
	}
	return out
}

// killOffsets lists the kills' times relative to at.
func killOffsets(ks []killRecord, at time.Time) []time.Duration {
	out := make([]time.Duration, len(ks))
	for i, k := range ks {
		out[i] = k.at.Sub(at).Round(time.Millisecond)
	}
	return out
}

// logDelays logs how many runs were taken over and how long after the kill
// they resumed (min, median, max).
func logDelays(t *testing.T, delays []time.Duration) {
	if len(delays) == 0 {
		t.Log("takeovers: none (no kill found a run unfinished)")
		return
	}
	slices.Sort(delays)
	t.Logf("takeovers: %d runs resumed elsewhere after the kill in min %s, median %s, max %s (bound: %s for a kill's first, then %d a second)",
		len(delays), delays[0].Round(time.Millisecond), delays[len(delays)/2].Round(time.Millisecond),
		delays[len(delays)-1].Round(time.Millisecond), takeoverBound, resumeFloor)
}
