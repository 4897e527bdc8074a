package engine

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// Executing reports whether run id executes in this process now.
func (e *Engine) Executing(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.active[id]
	return ok
}

// Interrupted reports whether run r, recorded running, has lost the
// process that executed it. executing tells whether the calling process
// executes a run (nil: it executes none). Otherwise the owner's lock
// decides, never a timeout: a store one process holds at a time (a bolt
// file, state.Exclusive) is held by the caller, so no other process
// executes r; in a shared store, r's owner (Options.Process, "host/pid@start")
// is not a serve replica (state.Coordinator: the other replicas take its
// runs over) and is a process of this host that no longer exists, or a
// run replica (runbook run) of another host whose lease expired.
func Interrupted(st state.Store, r *state.Run, executing func(id string) bool) bool {
	return interrupted(st, r, executing, nil)
}

// interrupted is Interrupted, remembering in gone (when not nil) what it
// found out about each owner: a listing asks about many runs of a few
// owners.
func interrupted(st state.Store, r *state.Run, executing func(id string) bool, gone map[string]bool) bool {
	if r.Status != state.RunRunning || executing != nil && executing(r.ID) {
		return false
	}
	if ex, ok := st.(state.Exclusive); ok && ex.Exclusive() {
		return true
	}
	if g, ok := gone[r.Owner]; ok {
		return g
	}
	g := ownerLost(st, r.Owner)
	if gone != nil {
		gone[r.Owner] = g
	}
	return g
}

// ownerLost reports whether owner, of a run recorded running in a shared
// store, is gone for good: see interrupted.
func ownerLost(st state.Store, owner string) bool {
	kind, expired := replicaOf(st, owner)
	_, local := onThisHost(owner)
	switch {
	case kind == state.ReplicaServe:
		return false
	case local:
		return ownerGone(owner)
	default:
		return kind == state.ReplicaRun && expired
	}
}

// Shown returns r as it is shown: a copy with status interrupted when
// Interrupted says so, else r itself.
func Shown(st state.Store, r *state.Run, executing func(id string) bool) *state.Run {
	return shown(st, r, executing, nil)
}

func shown(st state.Store, r *state.Run, executing func(id string) bool, gone map[string]bool) *state.Run {
	if !interrupted(st, r, executing, gone) {
		return r
	}
	cp := *r
	cp.Status = state.RunInterrupted
	return &cp
}

// ResumeHint is the command that continues an interrupted run.
func ResumeHint(id string) string { return "runbook run --resume " + id }

// Listing is which runs ListShown lists. Its RunFilter is what the store
// filters, except Status, which matches the status shown (a run recorded
// running is listed under running or interrupted, as Shown decides), and
// Limit, which bounds the runs listed (0: all).
type Listing struct {
	state.RunFilter
	Since time.Time // created at or after; zero: no bound
	Until time.Time // created before; zero: no bound
	// Keep chooses among the runs as shown (nil: every one), for what the
	// store does not filter.
	Keep func(r *state.Run) bool
	// Executing reports whether the caller executes a run (nil: none).
	Executing func(id string) bool
}

// maxChunk caps how many runs one read asks the store for.
const maxChunk = 4096

// ListShown lists runs newest first as Shown shows them. next is the
// cursor after them when another run follows, nil when the listing is
// complete. The store is read from the listing's start (Before, or Until
// when it comes later) in chunks, so a listing deep in the history costs
// what the first does; the listing stops at the first run created before
// Since.
func ListShown(ctx context.Context, st state.Store, l Listing) (runs []*state.Run, next *state.RunCursor, err error) {
	f := l.RunFilter
	want, limit := f.Status, f.Limit
	f.Status, f.Before = recordedAs(want), l.start()
	f.Limit = 0
	if limit > 0 {
		f.Limit = limit + 1
	}
	gone := map[string]bool{} // by owner: a listing holds many runs of a few owners
	for {
		read, err := st.ListRuns(ctx, f)
		if err != nil {
			return nil, nil, err
		}
		for _, r := range read {
			if !l.Since.IsZero() && r.CreatedAt.Before(l.Since) {
				return runs, nil, nil
			}
			r = shown(st, r, l.Executing, gone)
			if len(want) > 0 && !slices.Contains(want, r.Status) || l.Keep != nil && !l.Keep(r) {
				continue
			}
			if limit > 0 && len(runs) == limit {
				return runs, state.CursorAfter(runs[len(runs)-1]), nil
			}
			runs = append(runs, r)
		}
		if f.Limit == 0 || len(read) < f.Limit {
			return runs, nil, nil
		}
		f.Before = state.CursorAfter(read[len(read)-1])
		f.Limit = min(4*f.Limit, maxChunk)
	}
}

// start is where the store's listing starts: after Before, or before
// Until, whichever comes later in the listing (newest first).
func (l *Listing) start() *state.RunCursor {
	if l.Until.IsZero() {
		return l.Before
	}
	until := state.CursorBefore(l.Until)
	if l.Before == nil || l.Before.Follows(&state.Run{CreatedAt: until.CreatedAt, ID: until.ID}) {
		return until
	}
	return l.Before
}

// recordedAs returns the statuses the runs shown with want are recorded
// with: a run shown interrupted may be recorded running.
func recordedAs(want []state.RunStatus) []state.RunStatus {
	if !slices.ContainsFunc(want, shownFromRunning) {
		return want
	}
	q := slices.DeleteFunc(slices.Clone(want), func(s state.RunStatus) bool { return s == state.RunInterrupted })
	if !slices.Contains(q, state.RunRunning) {
		q = append(q, state.RunRunning)
	}
	return q
}

// shownFromRunning reports whether a run recorded running may be shown
// with status s.
func shownFromRunning(s state.RunStatus) bool {
	return s == state.RunRunning || s == state.RunInterrupted
}

// thisProcess names this process as an owner: "host/pid", and
// "host/pid@start" where the process's start can be read (Linux), so
// that a process that reuses a dead owner's pid is not taken for it.
func thisProcess() string {
	host, _ := os.Hostname()
	pid := os.Getpid()
	if start := processStart(pid); start != "" {
		return fmt.Sprintf("%s/%d@%s", host, pid, start)
	}
	return fmt.Sprintf("%s/%d", host, pid)
}

// ownerGone reports whether owner ("host/pid" or "host/pid@start",
// Options.Process) names a process of this host that no longer exists:
// no process has the pid, or the one that has it started at another
// moment (the pid was reused).
func ownerGone(owner string) bool {
	local, ok := onThisHost(owner)
	if !ok {
		return false
	}
	num, start, _ := strings.Cut(local, "@")
	pid, err := strconv.Atoi(num)
	if err != nil || pid <= 0 {
		return false
	}
	if pid != os.Getpid() && !processExists(pid) {
		return true
	}
	// The pid is taken (by this process, or another): the owner is gone
	// if the process that has it started at another moment.
	now := processStart(pid)
	return start != "" && now != "" && now != start
}

// onThisHost returns what owner ("host/pid…") names after its host, and
// whether that host is this one.
func onThisHost(owner string) (local string, ok bool) {
	i := strings.LastIndexByte(owner, '/')
	host, _ := os.Hostname()
	if i < 0 || owner[:i] != host {
		return "", false
	}
	return owner[i+1:], true
}
