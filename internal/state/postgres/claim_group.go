package postgres

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Claims in groups, with the claimed runs' step records.
//
// A replica claims each run it is about to execute (ClaimRun): the runs
// of a webhook delivery group are committed together and claimed a
// moment later, side by side. The claims waiting at the same moment, of
// one replica and one kind (adopt or not), go in one statement: one
// UPDATE of every run that returns the runs it made the replica's, joined
// with their step records. The engine reads a claimed run's step records
// first thing (state.Store.Steps): the records read under the claim are
// kept for that read (claimedSteps), which then costs no round trip. They
// are the run's records as of its claim: once the run is this replica's,
// only this replica's fenced writes change them, and each such write
// through this store drops what was kept (forgetSteps), so a later read
// asks the database. Records kept for a run that is not read soon (its
// claim was not followed by an execution here) are not used after
// maxKeptAge, and dropped once more than maxKeptClaims runs' are kept.

// maxKeptClaims bounds the claimed runs whose step records are kept, and
// maxKeptAge how long: the engine reads them within milliseconds of the
// claim; records kept longer (the run was not executed here after all)
// are read from the database again.
const (
	maxKeptClaims = 1024
	maxKeptAge    = time.Second
)

// claimReq is a ClaimRun waiting for a group.
type claimReq struct {
	ctx      context.Context
	id       string
	replica  string
	adopt    bool
	ok       bool
	err      error
	answered chan struct{}
	taken    bool
	gone     bool // abandoned by its caller before a worker took it
}

// claimGrouper queues claims and sends them in groups with one worker,
// started when claims queue and ended when none is left.
type claimGrouper struct {
	s       *Store
	mu      sync.Mutex
	queue   []*claimReq
	running bool
	// groups and members count the claim statements sent for more than one
	// run and the claims they held.
	groups, members atomic.Int64
	hold            int // as writeGrouper.hold

	keptMu sync.Mutex
	kept   map[string]keptSteps // run ID -> step records read under its claim
}

// keptSteps are a run's step records read under its claim, at.
type keptSteps struct {
	recs [][]byte
	at   time.Time
}

// ClaimGroups returns how many claim statements the store has sent for
// several runs at once and how many claims they held.
func (s *Store) ClaimGroups() (groups, claims int64) {
	return s.claims.groups.Load(), s.claims.members.Load()
}

// claim queues a claim and waits for its outcome; a ctx that ends before
// the worker takes it returns ctx's error (nothing was claimed).
func (g *claimGrouper) claim(ctx context.Context, id, replica string, adopt bool) (bool, error) {
	c := &claimReq{ctx: ctx, id: id, replica: replica, adopt: adopt, answered: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, c)
	if !g.running {
		g.running = true
		go g.work()
	}
	g.mu.Unlock()
	select {
	case <-c.answered:
		return c.ok, c.err
	case <-ctx.Done():
	}
	g.mu.Lock()
	if !c.taken {
		c.gone = true
		g.mu.Unlock()
		return false, ctx.Err()
	}
	g.mu.Unlock()
	<-c.answered
	return c.ok, c.err
}

// work sends groups until the queue is empty.
func (g *claimGrouper) work() {
	for {
		g.mu.Lock()
		g.hold = waitQueued(&g.mu, g.hold, func() int { return len(g.queue) })
		group := g.take()
		if len(group) == 0 {
			g.running = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		g.s.claimGroup(group)
		if len(group) > 1 {
			g.groups.Add(1)
			g.members.Add(int64(len(group)))
		}
		for _, c := range group {
			close(c.answered)
		}
	}
}

// take removes from the queue the live claims of the oldest claim's
// replica and kind (each run once, up to maxWriteGroup) and marks them
// taken; the others stay queued in their order. g.mu is held.
func (g *claimGrouper) take() []*claimReq {
	var group []*claimReq
	ids := map[string]bool{}
	rest := g.queue[:0]
	for _, c := range g.queue {
		switch {
		case c.gone:
			continue
		case len(group) > 0 && (c.replica != group[0].replica || c.adopt != group[0].adopt) ||
			len(group) == maxWriteGroup || ids[c.id]:
			rest = append(rest, c)
			continue
		}
		ids[c.id] = true
		c.taken = true
		group = append(group, c)
	}
	clear(g.queue[len(rest):])
	g.queue = rest
	return group
}

// claimRuns is ClaimRun's statement for the runs $2: the runs it made
// replica $1's, each with its step records in order (one row without a
// record for a run that has none).
func claimRuns(adopt bool) string {
	return `WITH c AS (UPDATE runbook_runs r SET owner = $1
		WHERE r.id = ANY($2::text[]) AND (r.owner = $1 OR ` + unfinishedTop + ` AND ` + claimCondition(adopt) + `)
		RETURNING r.id)
	SELECT c.id, s.record FROM c LEFT JOIN runbook_steps s ON s.run_id = c.id ORDER BY c.id, s.ord`
}

// claimCondition is the condition on a run (alias r) that replica $1 may
// claim it: takeable, or, for an explicit resume (adopt), any owner but
// another live replica.
func claimCondition(adopt bool) string {
	if adopt {
		return `NOT EXISTS (SELECT 1 FROM runbook_replicas p WHERE p.id = r.owner AND p.id <> $1 AND p.expires_at > now())`
	}
	return takeable
}

// claimGroup claims the runs of group (one replica, one kind) in one
// statement and keeps the step records of those claimed for their
// engine's first read.
func (s *Store) claimGroup(group []*claimReq) {
	ctxs := make([]context.Context, len(group))
	for i, c := range group {
		ctxs[i] = c.ctx
	}
	ctx, release := jointContext(ctxs)
	defer release()
	ids := make([]string, len(group))
	for i, c := range group {
		ids[i] = c.id
	}
	var claimed map[string][][]byte
	err := s.retry(ctx, func() error {
		claimed = map[string][][]byte{}
		rows, err := s.pool.Query(ctx, claimRuns(group[0].adopt), group[0].replica, ids)
		if err != nil {
			return err
		}
		var id string
		var rec []byte
		_, err = pgx.ForEachRow(rows, []any{&id, &rec}, func() error {
			recs := claimed[id]
			if rec != nil {
				recs = append(recs, rec)
			}
			claimed[id] = recs
			return nil
		})
		return err
	})
	for _, c := range group {
		if err != nil {
			c.err = fmt.Errorf("claim run %s: %w", c.id, err)
			continue
		}
		recs, ok := claimed[c.id]
		c.ok = ok
		if ok {
			s.claims.keep(c.id, recs)
		}
	}
}

// keep keeps recs, run id's step records read under its claim.
func (g *claimGrouper) keep(id string, recs [][]byte) {
	g.keptMu.Lock()
	defer g.keptMu.Unlock()
	if g.kept == nil || len(g.kept) >= maxKeptClaims {
		g.kept = map[string]keptSteps{}
	}
	g.kept[id] = keptSteps{recs: recs, at: time.Now()}
}

// claimedSteps returns, once, the step records read under run id's claim.
func (g *claimGrouper) claimedSteps(id string) ([][]byte, bool) {
	g.keptMu.Lock()
	defer g.keptMu.Unlock()
	k, ok := g.kept[id]
	if ok {
		delete(g.kept, id)
	}
	return k.recs, ok && time.Since(k.at) < maxKeptAge
}

// forgetSteps drops the step records kept for run id: a write changes
// them.
func (g *claimGrouper) forgetSteps(id string) {
	g.keptMu.Lock()
	defer g.keptMu.Unlock()
	delete(g.kept, id)
}
