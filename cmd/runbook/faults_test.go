package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
)

// The fault campaign of issue 27, with the real binary: three replicas of
// runbook serve on one PostgreSQL (server.lease: 3s), thirty webhook
// senders, a playbook under a concurrency key whose shell steps write one
// start and one end line per execution to a ledger file, and an approval
// answered by its timeout. The faults are inputs: backends terminated,
// the server restarted, replicas killed and stopped. The checks read the
// ledger and the store, and each failure names the run, the step, the key
// or the answer that broke.

// campaignLease is the replicas' server.lease, as in the issue.
const campaignLease = 3 * time.Second

// finalWithin bounds the time from the database answering again to the
// last acknowledged hook's run ending (issue 27's acceptance).
const finalWithin = 30 * time.Second

const campaignSecret = "campaign-hook-secret"

// keyedPlaybook is the campaign's webhook playbook: one run per hook,
// under the hook's key (its unsubscribeNo), two shell steps around an
// approval that its timeout approves.
func keyedPlaybook(ledger string) string {
	cmd := fmt.Sprintf(`echo "start $KEY $RUN $STEP $PPID $(date +%%s%%N)" >> %[1]s; sleep 0.1; echo "end $KEY $RUN $STEP $PPID $(date +%%s%%N)" >> %[1]s`, ledger)
	step := func(id string) string {
		return fmt.Sprintf(`  - id: %s
    uses: shell
    with:
      command: '%s'
      env: {KEY: "${{ inputs.key }}", RUN: "${{ run.id }}", STEP: %s}
`, id, cmd, id)
	}
	return `version: 1
name: keyed
inputs:
  key: {type: string}
  hook: {type: string}
triggers:
  - webhook: {route: hooks, event: UNSUBSCRIBE, each: hook}
    inputs:
      key: ${{ trigger.hook.unsubscribeNo }}
      hook: ${{ trigger.hook.hookId }}
concurrency: {key: "campaign-${{ inputs.key }}", on_busy: queue}
steps:
` + step("first") + `  - id: gate
    uses: approval
    with: {message: "go on?", timeout: 2s, on_timeout: approve}
` + step("second")
}

// pairPlaybook is part (a)'s: an approval two people must answer, then a
// shell step that writes one line per execution to the ledger.
func pairPlaybook(ledger string) string {
	return fmt.Sprintf(`version: 1
name: pair
steps:
  - {id: gate, uses: approval, with: {message: "both?", required: 2}}
  - id: after
    uses: shell
    with:
      command: 'echo "start pair $RUN after $PPID $(date +%%s%%N)" >> %[1]s; echo "end pair $RUN after $PPID $(date +%%s%%N)" >> %[1]s'
      env: {RUN: "${{ run.id }}"}
`, ledger)
}

// loss is how (killed, stopped) and when a replica was lost.
type loss struct {
	how string
	at  time.Time
}

// campaign is three replicas on one database and what the test saw.
type campaign struct {
	t      *testing.T
	c      *cli
	rs     *replicaSet
	st     *postgres.Store
	ledger string
	client *http.Client
	paused [3]atomic.Bool

	mu    sync.Mutex
	lost  map[int][]loss       // replica pid -> how and when it was lost, each time (a replica stopped may later be killed): its steps executing then may run again once
	acked map[string]time.Time // hook ID -> when a replica acknowledged its delivery
	procs []*serveProc         // every replica process started, for their logs
	// answered is when the database last answered again after a fault.
	answered time.Time

	failures sync.Map // problems the goroutines saw
}

func newCampaign(t *testing.T) *campaign {
	c := newCLI(t)
	dsn := onDatabase(t, c)
	ledger := filepath.Join(c.dir, "ledger.txt")
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("playbooks/keyed.yaml", keyedPlaybook(ledger))
	c.file("playbooks/pair.yaml", pairPlaybook(ledger))
	c.file("runbook.yaml", fmt.Sprintf("server: {lease: %s, max_running: 1000}\nwebhooks:\n  routes:\n    hooks: {secret: CAMPAIGN_WEBHOOK_SECRET}\n", campaignLease))
	c.env = append(c.env, "CAMPAIGN_WEBHOOK_SECRET="+campaignSecret)
	host, err := os.Hostname()
	require.NoError(t, err)
	rs := &replicaSet{c: c, args: []string{"--playbooks", filepath.Join(c.dir, "playbooks")}, proc: make([]*serveProc, 3), host: host}
	for i := range 3 {
		rs.start(i)
	}
	st, err := postgres.Open(context.Background(), dsn, postgres.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	cp := &campaign{t: t, c: c, rs: rs, st: st, ledger: ledger,
		client: &http.Client{Timeout: 5 * time.Second},
		lost:   map[int][]loss{}, acked: map[string]time.Time{}}
	cp.procs = append(cp.procs, rs.proc...)
	t.Cleanup(cp.resumeAll) // a stopped replica must not outlive a failed test stopped
	t.Cleanup(cp.keepLogs)
	return cp
}

func (cp *campaign) fail(format string, args ...any) {
	cp.failures.Store(fmt.Sprintf(format, args...), true)
}

// reportFailures fails the test with every problem the goroutines saw.
func (cp *campaign) reportFailures() {
	var all []string
	cp.failures.Range(func(k, _ any) bool { all = append(all, k.(string)); return true })
	sort.Strings(all)
	for _, f := range all {
		cp.t.Error(f)
	}
}

// url is replica i's address, "" while it is down or stopped.
func (cp *campaign) url(i int) string {
	if cp.paused[i].Load() {
		return ""
	}
	return cp.rs.url(i)
}

func (cp *campaign) pid(i int) int {
	cp.rs.mu.Lock()
	defer cp.rs.mu.Unlock()
	return cp.rs.proc[i].cmd.Process.Pid
}

// api sends an API request to the replica at url.
func (cp *campaign) api(method, url string, body any) (int, map[string]any, error) {
	return call(cp.client, method, url, body)
}

// hookDelivery is one delivery of the campaign: its hooks and their keys.
type hookDelivery struct {
	id    string
	hooks []string
	body  []byte
}

// campaignDeliveries makes n UNSUBSCRIBE deliveries of 1 to 2 hooks each;
// hook h of the whole sequence has key h % keys, so each key sees its
// hooks spread over the campaign.
func campaignDeliveries(n, keys int) []hookDelivery {
	out := make([]hookDelivery, n)
	h := 0
	for i := range out {
		d := hookDelivery{id: fmt.Sprintf("fc-%04d", i)}
		var hooks []map[string]any
		for range 1 + i%2 {
			hid := fmt.Sprintf("fc-h%04d", h)
			d.hooks = append(d.hooks, hid)
			hooks = append(hooks, map[string]any{
				"hookId": hid, "recipientNo": fmt.Sprintf("0107%07d", h), "unsubscribeNo": fmt.Sprintf("k%02d", h%keys),
				"enterpriseName": "runbook", "createdDateTime": "2026-11-29T09:00:00.000+09:00",
			})
			h++
		}
		d.body, _ = json.Marshal(map[string]any{
			"hooksId": d.id, "webhookConfigId": "cfg-campaign", "productName": "SMS", "appKey": "app-campaign",
			"event": "UNSUBSCRIBE", "hooks": hooks,
		})
		out[i] = d
	}
	return out
}

// send posts deliveries from senders goroutines, one every pace, each to a
// replica that is up, the next one when not answered 200, until one
// acknowledges it or until deadline. It returns when every delivery is
// acknowledged or given up.
func (cp *campaign) send(ds []hookDelivery, senders int, pace time.Duration, deadline time.Time) {
	queue := make(chan hookDelivery)
	var wg sync.WaitGroup
	for w := range senders {
		wg.Go(func() {
			for d := range queue {
				cp.deliver(d, w, deadline)
			}
		})
	}
	for _, d := range ds {
		queue <- d
		time.Sleep(pace)
	}
	close(queue)
	wg.Wait()
}

func (cp *campaign) deliver(d hookDelivery, w int, deadline time.Time) {
	var last string
	for attempt := 0; ; attempt++ {
		if time.Now().After(deadline) {
			cp.fail("delivery %s (hooks %v) never acknowledged; last answer: %s", d.id, d.hooks, last)
			return
		}
		u := cp.url((w + attempt) % 3)
		if u == "" {
			continue
		}
		req, _ := http.NewRequest("POST", u+"/hooks/hooks", bytes.NewReader(d.body))
		req.Header.Set("Content-Type", "application/json;charset=UTF-8")
		req.Header.Set("X-Cloud-Webhook-Signature", campaignSecret)
		resp, err := cp.client.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				cp.mu.Lock()
				for _, h := range d.hooks {
					cp.acked[h] = time.Now()
				}
				cp.mu.Unlock()
				return
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(b)))
		} else {
			last = err.Error()
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dbAnswered records that the database answers again now (after a fault).
func (cp *campaign) dbAnswered(at time.Time) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if at.After(cp.answered) {
		cp.answered = at
	}
}

// kill kills replica i with SIGKILL and starts it again after down; its
// steps executing then may run again once.
func (cp *campaign) kill(i int, down time.Duration) {
	pid := cp.pid(i)
	cp.rs.kill(i)
	cp.mu.Lock()
	cp.lost[pid] = append(cp.lost[pid], loss{how: "killed", at: time.Now()}) // it has exited
	cp.mu.Unlock()
	cp.t.Logf("replica %d (pid %d) killed", i, pid)
	time.Sleep(down)
	cp.rs.start(i)
	cp.rs.mu.Lock()
	cp.procs = append(cp.procs, cp.rs.proc[i])
	cp.rs.mu.Unlock()
}

// keepLogs writes the replicas' logs into the directory
// RUNBOOK_CAMPAIGN_LOGS names, when it is set and the test failed.
func (cp *campaign) keepLogs() {
	dir := os.Getenv("RUNBOOK_CAMPAIGN_LOGS")
	if dir == "" || !cp.t.Failed() {
		return
	}
	dir = filepath.Join(dir, cp.t.Name())
	if err := os.MkdirAll(dir, 0o700); err != nil {
		cp.t.Log(err)
		return
	}
	for _, s := range cp.procs {
		p := filepath.Join(dir, fmt.Sprintf("replica-%d.log", s.cmd.Process.Pid))
		if err := os.WriteFile(p, []byte(s.stderrText()), 0o600); err != nil {
			cp.t.Log(err)
		}
	}
	cp.t.Logf("replica logs in %s", dir)
}

// stop stops replica i with SIGSTOP for stopped (past the lease: another
// replica takes its runs over), then continues it.
func (cp *campaign) stop(i int, stopped time.Duration) {
	pid := cp.pid(i)
	cp.mu.Lock()
	cp.lost[pid] = append(cp.lost[pid], loss{how: "stopped", at: time.Now()})
	cp.mu.Unlock()
	cp.paused[i].Store(true)
	require.NoError(cp.t, syscall.Kill(pid, syscall.SIGSTOP))
	cp.t.Logf("replica %d (pid %d) stopped for %s", i, pid, stopped)
	time.Sleep(stopped)
	require.NoError(cp.t, syscall.Kill(pid, syscall.SIGCONT))
	cp.paused[i].Store(false)
}

// resumeAll continues every replica a failed test left stopped.
func (cp *campaign) resumeAll() {
	for i := range cp.paused {
		if cp.paused[i].Load() {
			_ = syscall.Kill(cp.pid(i), syscall.SIGCONT)
			cp.paused[i].Store(false)
		}
	}
}

// keyedRuns returns the runs of the keyed playbook by hook ID.
func (cp *campaign) keyedRuns() map[string][]*state.Run {
	cp.t.Helper()
	runs, err := cp.st.ListRuns(context.Background(), state.RunFilter{Playbook: "keyed"})
	require.NoError(cp.t, err)
	out := map[string][]*state.Run{}
	for _, r := range runs {
		h := fmt.Sprint(r.Inputs["hook"])
		out[h] = append(out[h], r)
	}
	return out
}

// waitFinal waits until every acknowledged hook's run has ended, or until
// deadline, and returns the runs by hook as they are then.
func (cp *campaign) waitFinal(deadline time.Time) map[string][]*state.Run {
	cp.t.Helper()
	for {
		byHook := cp.keyedRuns()
		open := 0
		cp.mu.Lock()
		for h := range cp.acked {
			rs := byHook[h]
			if len(rs) == 0 || !rs[0].Status.Done() {
				open++
			}
		}
		cp.mu.Unlock()
		if open == 0 || time.Now().After(deadline) {
			return byHook
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// describe names a run for a failure message: its ID, hook, key, status,
// owner and error.
func describe(r *state.Run) string {
	s := fmt.Sprintf("run %s (hook %v, key %v) %s, owner %s", r.ID, r.Inputs["hook"], r.Inputs["key"], r.Status, r.Owner)
	if r.Error != nil {
		s += fmt.Sprintf(", error %s: %s", r.Error.Code, r.Error.Message)
	}
	if !r.WakeAt.IsZero() {
		s += fmt.Sprintf(", wake at %s", r.WakeAt.Format("15:04:05.000"))
	}
	return s
}

// history is run id's events, one line each (time, type, step, owner or
// message), for a failure message.
func (cp *campaign) history(id string) string {
	evs, err := cp.st.Events(context.Background(), id, 0, 0)
	if err != nil {
		return "events: " + err.Error()
	}
	var b strings.Builder
	for _, ev := range evs {
		if ev.Type == "log" {
			continue
		}
		fmt.Fprintf(&b, "\n\t\t%s %s", clock(ev.Time), ev.Type)
		if ev.Step != "" {
			fmt.Fprintf(&b, " %s", ev.Step)
		}
		if ev.Message != "" {
			fmt.Fprintf(&b, ": %s", ev.Message)
		}
		if m := heldBy.FindStringSubmatch(ev.Message); ev.Type == "run.queued" && m != nil {
			b.WriteString(cp.holderState(m[1]))
		}
		if o, ok := ev.Data["owner"]; ok {
			fmt.Fprintf(&b, " (owner %v)", o)
		}
	}
	return b.String()
}

// heldBy finds the run holding the key in a run.queued event's message.
var heldBy = regexp.MustCompile(`held by run (\S+?):`)

// holderState says how the run holding a key is now: a holder that ended
// before the run queued on it was woken tells a lost wake.
func (cp *campaign) holderState(id string) string {
	r, err := cp.st.GetRun(context.Background(), id)
	if err != nil {
		return fmt.Sprintf(" [holder: %v]", err)
	}
	if r.Status.Done() {
		return fmt.Sprintf(" [holder %s since %s]", r.Status, clock(r.EndedAt))
	}
	return fmt.Sprintf(" [holder %s, owner %s]", r.Status, r.Owner)
}

// figures is what a part of the campaign measured.
type figures struct {
	acked, runs, final, failed, overlaps, twice, again int
	// selfStopped counts the times a replica stopped its runs itself, its
	// lease not renewed in time (noteSelfStops).
	selfStopped int
	// lastFinal is the time from the database answering again to the
	// last acknowledged hook's run ending.
	lastFinal time.Duration
}

func (f figures) String() string {
	return fmt.Sprintf("hooks acked %d, runs %d, final %d, failed %d, key overlaps %d, steps executed twice %d (allowed repeats on a lost replica %d; replicas that stopped their runs themselves %d), last run final %s after the database answered again",
		f.acked, f.runs, f.final, f.failed, f.overlaps, f.twice, f.again, f.selfStopped, f.lastFinal.Round(time.Millisecond))
}

// checkHooks checks that every acknowledged hook has exactly one run, that
// it ended within finalWithin of the database answering again, and that it
// succeeded.
func (cp *campaign) checkHooks(byHook map[string][]*state.Run, f *figures) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	f.acked = len(cp.acked)
	var last time.Time
	var hooks []string
	for h := range cp.acked {
		hooks = append(hooks, h)
	}
	sort.Strings(hooks)
	for _, h := range hooks {
		rs := byHook[h]
		f.runs += len(rs)
		switch {
		case len(rs) == 0:
			cp.t.Errorf("hook %s acknowledged at %s has no run", h, cp.acked[h].Format("15:04:05.000"))
			continue
		case len(rs) > 1:
			var ids []string
			for _, r := range rs {
				ids = append(ids, r.ID)
			}
			cp.t.Errorf("hook %s has %d runs: %v", h, len(rs), ids)
		}
		r := rs[0]
		if !r.Status.Done() {
			cp.t.Errorf("not final %s after the database answered again: %s; events:%s", finalWithin, describe(r), cp.history(r.ID))
			continue
		}
		f.final++
		if r.EndedAt.After(last) {
			last = r.EndedAt
		}
		if r.Status != state.RunSucceeded {
			f.failed++
			cp.t.Errorf("%s, want succeeded; events:%s", describe(r), cp.history(r.ID))
		}
	}
	for h := range byHook {
		if _, ok := cp.acked[h]; !ok {
			cp.t.Logf("hook %s has a run but its delivery was never acknowledged (a sender gave up or timed out after the commit)", h)
		}
	}
	if !last.IsZero() && !cp.answered.IsZero() {
		f.lastFinal = last.Sub(cp.answered)
		if f.lastFinal > finalWithin {
			cp.t.Errorf("the last run ended %s after the database answered again, want within %s", f.lastFinal.Round(time.Millisecond), finalWithin)
		}
	}
}
