package postgres

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runbook/runbook/internal/state"
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
	id      string
	replica string
	adopt   bool
	ok      bool
	err     error
}

// claimGrouper claims runs in groups, with one worker, and keeps the
// claimed runs' step records.
type claimGrouper struct {
	*groupQueue[*claimReq]

	keptMu sync.Mutex
	kept   map[string]keptSteps // run ID -> step records read under its claim
}

// keptSteps are a run's step records and status read under its claim,
// at.
type keptSteps struct {
	recs   [][]byte
	status state.RunStatus // "": not read (a run created as its owner's: CreateRun)
	at     time.Time
}

// newClaimGrouper returns s's claim grouper: one group in flight, each
// of the claims of one replica and one kind (adopt or not), each run
// once; a caller waits for the outcome of a claim taken.
func newClaimGrouper(s *Store) *claimGrouper {
	return &claimGrouper{groupQueue: &groupQueue[*claimReq]{
		workers: 1, max: maxWriteGroup, fits: sameClaims, send: s.claimGroup, waitTaken: true,
	}}
}

// sameClaims returns a new claim group's rule: claims of the first
// claim's replica and kind, each run once.
func sameClaims() func(*claimReq) bool {
	var first *claimReq
	ids := map[string]bool{}
	return func(c *claimReq) bool {
		if first == nil {
			first = c
		}
		if c.replica != first.replica || c.adopt != first.adopt || ids[c.id] {
			return false
		}
		ids[c.id] = true
		return true
	}
}

// ClaimGroups returns how many claim statements the store has sent for
// several runs at once and how many claims they held.
func (s *Store) ClaimGroups() (groups, claims int64) {
	return s.claims.Groups()
}

// claim queues a claim and waits for its outcome; a ctx that ends before
// the worker takes it returns ctx's error (nothing was claimed).
func (g *claimGrouper) claim(ctx context.Context, id, replica string, adopt bool) (bool, error) {
	c := &claimReq{id: id, replica: replica, adopt: adopt}
	if err := g.do(ctx, c); err != nil {
		return false, err
	}
	return c.ok, c.err
}

// claimRuns is ClaimRun's statement for the runs $2: the runs it made
// replica $1's, each with its step records in order (one row without a
// record for a run that has none), and its status. A claim of one run
// (one) names it as text, not as an array of one: PostgreSQL estimated
// the array's generic plan dearer than a plan for the array it was given,
// so it planned the statement again at every call (0.26 ms a claim, most
// of what a claim cost it when claims come one at a time); the text's
// generic plan is kept.
func claimRuns(adopt, one bool) string {
	runs := `r.id = ANY($2::text[])`
	if one {
		runs = `r.id = $2`
	}
	return `WITH c AS (UPDATE runbook_runs r SET owner = $1
		WHERE ` + runs + ` AND (r.owner = $1 OR ` + unfinishedTop + ` AND ` + claimCondition(adopt) + `)
		RETURNING r.id, r.status)
	SELECT c.id, c.status, s.record FROM c LEFT JOIN runbook_steps s ON s.run_id = c.id ORDER BY c.id, s.ord`
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
// engine's first read. It reports whether it claimed more than one run.
func (s *Store) claimGroup(ctx context.Context, group []*claimReq) bool {
	ids := make([]string, len(group))
	for i, c := range group {
		ids[i] = c.id
	}
	one := len(ids) == 1
	var runs any = ids
	if one {
		runs = ids[0]
	}
	var claimed map[string]keptSteps
	err := s.retry(ctx, func() error {
		claimed = map[string]keptSteps{}
		rows, err := s.pool.Query(ctx, claimRuns(group[0].adopt, one), group[0].replica, runs)
		if err != nil {
			return err
		}
		var id string
		var status state.RunStatus
		var rec []byte
		_, err = pgx.ForEachRow(rows, []any{&id, &status, &rec}, func() error {
			k := claimed[id]
			if rec != nil {
				k.recs = append(k.recs, rec)
			}
			k.status = status
			claimed[id] = k
			return nil
		})
		return err
	})
	for _, c := range group {
		if err != nil {
			c.err = fmt.Errorf("claim run %s: %w", c.id, err)
			continue
		}
		k, ok := claimed[c.id]
		c.ok = ok
		if ok {
			s.claims.keep(c.id, k)
		}
	}
	return len(group) > 1
}

// keep keeps k, run id's step records and status read under its claim.
func (g *claimGrouper) keep(id string, k keptSteps) {
	g.keptMu.Lock()
	defer g.keptMu.Unlock()
	if g.kept == nil || len(g.kept) >= maxKeptClaims {
		g.kept = map[string]keptSteps{}
	}
	k.at = time.Now()
	g.kept[id] = k
}

// ClaimedStatus returns the status run id had when this store claimed it
// (ClaimRun) a moment ago, before any write of the run through this
// store: state.ClaimReadsStatus.
func (s *Store) ClaimedStatus(id string) (state.RunStatus, bool) {
	g := s.claims
	g.keptMu.Lock()
	defer g.keptMu.Unlock()
	k, ok := g.kept[id]
	if !ok || k.status == "" || time.Since(k.at) >= maxKeptAge {
		return "", false
	}
	return k.status, true
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
