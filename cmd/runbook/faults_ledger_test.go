package main

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
)

// ledgerLine is one line the campaign's shell steps write: "start" or
// "end", the run's key, the run, the step, the replica executing it (the
// shell's parent) and when.
type ledgerLine struct {
	edge, key, run, step string
	pid                  int
	at                   time.Time
}

func (l ledgerLine) String() string {
	return fmt.Sprintf("%s on pid %d at %s", l.edge, l.pid, l.at.Format("15:04:05.000"))
}

// readLedger parses the ledger; a line cut by a kill is reported and
// skipped.
func (cp *campaign) readLedger() []ledgerLine {
	cp.t.Helper()
	b, err := os.ReadFile(cp.ledger)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(cp.t, err)
	var out []ledgerLine
	for _, s := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(s)
		if len(f) != 6 {
			cp.t.Logf("ledger: skipped line %q", s)
			continue
		}
		pid, errP := strconv.Atoi(f[4])
		ns, errT := strconv.ParseInt(f[5], 10, 64)
		if errP != nil || errT != nil {
			cp.t.Logf("ledger: skipped line %q", s)
			continue
		}
		out = append(out, ledgerLine{edge: f[0], key: f[1], run: f[2], step: f[3], pid: pid, at: time.Unix(0, ns)})
	}
	return out
}

// selfStop is what a replica logs when it stops executing its runs
// because it could not renew its lease in time (runner's leaseStopped).
const selfStop = "replica lease not renewed in time: stopped executing its runs here"

// noteSelfStops records, as losses, the times a replica stopped its runs
// itself because its lease was not renewed in time (on a machine loaded
// far past its cores, a replica may not renew a 3 s lease through a
// database restart), as its log says, and returns how many. Such a
// replica is lost for its runs as one stopped past its lease is: the
// steps it was executing run again once when it, or another, takes the
// runs up (docs/ha.md).
func (cp *campaign) noteSelfStops() int {
	n := 0
	for _, p := range cp.procs {
		for line := range strings.Lines(p.stderrText()) {
			if !strings.Contains(line, selfStop) {
				continue
			}
			ts, _, ok := strings.Cut(strings.TrimPrefix(line, "time="), " ")
			at, err := time.Parse(time.RFC3339Nano, ts)
			if !ok || err != nil {
				cp.t.Errorf("a replica's log line without its time: %q", line)
				continue
			}
			cp.mu.Lock()
			cp.lost[p.cmd.Process.Pid] = append(cp.lost[p.cmd.Process.Pid], loss{how: "stopped by itself (lease not renewed in time)", at: at})
			cp.mu.Unlock()
			n++
		}
	}
	return n
}

// forkSlack is how late a step's shell, forked by a replica before it was
// lost, may write its start line on a loaded machine: the step was
// executing on the lost replica all the same.
const forkSlack = time.Second

// checkSteps checks that no step executed twice, except once more after
// each execution on a replica that was killed or stopped past its lease
// meanwhile, and that every run recorded succeeded has each step's end in
// the ledger.
func (cp *campaign) checkSteps(lines []ledgerLine, runs []*state.Run, steps []string, f *figures) {
	starts := map[[2]string][]ledgerLine{}
	ends := map[[2]string]int{}
	for _, l := range lines {
		k := [2]string{l.run, l.step}
		if l.edge == "start" {
			starts[k] = append(starts[k], l)
		} else {
			ends[k]++
		}
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	keys := make([][2]string, 0, len(starts))
	for k := range starts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+keys[i][1] < keys[j][0]+keys[j][1] })
	for _, k := range keys {
		ss := starts[k]
		if len(ss) < 2 {
			continue
		}
		sort.Slice(ss, func(i, j int) bool { return ss[i].at.Before(ss[j].at) })
		// Each start but the first is allowed when the replica of the start
		// before it was lost in between: a step executing on a lost replica
		// runs again once, and so again if the replica that took it over is
		// lost in turn while executing it.
		var losses []loss // the loss that allows each start but the first
		for i := 1; i < len(ss); i++ {
			l, ok := cp.lossBetween(ss[i-1], ss[i])
			if !ok {
				break
			}
			losses = append(losses, l)
		}
		if len(losses) == len(ss)-1 {
			for i, l := range losses {
				f.again++
				cp.t.Logf("step %s of run %s ran again after its replica was %s at %s: %s, then %s", k[1], k[0], l.how, clock(l.at), ss[i], ss[i+1])
			}
			continue
		}
		f.twice++
		var at []string
		for _, s := range ss {
			at = append(at, s.String()+cp.lostTag(s.pid))
		}
		cp.t.Errorf("step %s of run %s executed %d times: %s; events:%s", k[1], k[0], len(ss), strings.Join(at, "; "), cp.history(k[0]))
	}
	for _, r := range runs {
		if r.Status != state.RunSucceeded {
			continue
		}
		for _, s := range steps {
			if ends[[2]string{r.ID, s}] == 0 {
				cp.t.Errorf("%s, but its step %s never ended in the ledger", describe(r), s)
			}
		}
	}
}

// lossBetween returns a loss of the replica that executed start line
// first that fell between it and the start line again: the replica was
// lost while the step executed there, so it may run once more elsewhere.
// A shell whose replica was killed between forking it and the shell
// reading its parent's pid says 1 ($PPID of an orphan): its replica is
// one killed within forkSlack of its line (only a kill orphans a step's
// shell here).
func (cp *campaign) lossBetween(first, again ledgerLine) (loss, bool) {
	for _, lo := range cp.lossesOf(first) {
		if first.at.Before(lo.at.Add(forkSlack)) && again.at.After(lo.at) {
			return lo, true
		}
	}
	return loss{}, false
}

// lossesOf returns the losses that may be those of the replica that
// wrote line l (see lossBetween).
func (cp *campaign) lossesOf(l ledgerLine) []loss {
	if l.pid != 1 {
		return cp.lost[l.pid]
	}
	var out []loss
	for _, ls := range cp.lost {
		for _, lo := range ls {
			if d := l.at.Sub(lo.at); lo.how == "killed" && d > -forkSlack && d < forkSlack {
				out = append(out, lo)
			}
		}
	}
	return out
}

// lostTag says when the replica pid was lost, each time it was.
func (cp *campaign) lostTag(pid int) string {
	var tags []string
	for _, l := range cp.lost[pid] {
		tags = append(tags, fmt.Sprintf("a replica %s at %s", l.how, clock(l.at)))
	}
	if len(tags) == 0 {
		return ""
	}
	return " (" + strings.Join(tags, ", ") + ")"
}

// span is the time a run executed its steps, from the ledger.
type span struct {
	run        string
	from, to   time.Time
	fromP, toP int
}

// checkOverlaps checks that no two runs of one key executed at the same
// time: the span of each run (its first step's start to its last step's
// end) against every earlier run of the key.
func (cp *campaign) checkOverlaps(lines []ledgerLine, f *figures) {
	byRun := map[string]*span{}
	keyOf := map[string]string{}
	for _, l := range lines {
		s := byRun[l.run]
		if s == nil {
			s = &span{run: l.run, from: l.at, to: l.at, fromP: l.pid, toP: l.pid}
			byRun[l.run] = s
			keyOf[l.run] = l.key
		}
		if l.at.Before(s.from) {
			s.from, s.fromP = l.at, l.pid
		}
		if l.at.After(s.to) {
			s.to, s.toP = l.at, l.pid
		}
	}
	perKey := map[string][]*span{}
	for run, s := range byRun {
		perKey[keyOf[run]] = append(perKey[keyOf[run]], s)
	}
	var keys []string
	for k := range perKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ss := perKey[k]
		sort.Slice(ss, func(i, j int) bool { return ss[i].from.Before(ss[j].from) })
		for i := 1; i < len(ss); i++ {
			for _, prev := range ss[:i] {
				if ss[i].from.Before(prev.to) {
					f.overlaps++
					cp.t.Errorf("key %s: run %s (%s on pid %d .. %s on pid %d) overlaps run %s (%s on pid %d .. %s on pid %d)",
						k, ss[i].run, clock(ss[i].from), ss[i].fromP, clock(ss[i].to), ss[i].toP,
						prev.run, clock(prev.from), prev.fromP, clock(prev.to), prev.toP)
				}
			}
		}
	}
}

func clock(t time.Time) string { return t.Format("15:04:05.000") }
