package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/runbook/runbook/internal/state"
)

// Group commit of new deliveries.
//
// What a new delivery costs PostgreSQL is mostly per statement and per
// transaction (planning a cached statement's executor, opening its
// relations and indexes, the commit), not per row: perf showed
// ExecInitModifyTable, BuildIndexInfo, plan cache checks and the
// socket's system calls on top, for 8 statements per delivery. So the
// new deliveries that wait at the same moment are committed together, in
// one transaction of four statements whatever their number (see
// commitGroup), each table written by one INSERT … SELECT FROM unnest.
//
// A group holds deliveries whose dedup keys are disjoint: a delivery that
// shares a key with one already taken waits for a later group, so within
// a group no two members claim one key. A member whose delivery key is
// already recorded (a redelivery, live or expired) is left out of the
// group's claims, runs and bodies by the group's statement itself (its
// playbook's snapshot may be stored: see groupSnapshots) and is then
// committed alone, statement by statement, as CommitDelivery commits any
// delivery whose fresh commit was refused. Any other refusal (a hook
// recorded under another delivery key, a taken run ID) aborts the group's
// transaction, which wrote nothing: every member is then committed alone.
// A member's failure never fails another member.

// groupWorkers bounds the group transactions of one Store in flight at
// once. While one waits for its commit (a WAL flush), the deliveries that
// arrive queue and go together in the next group, so groups grow with
// the load and the commit's latency. One worker made the largest groups
// and the least CPU per delivery: BenchmarkIntakeReplicas (internal/
// trigger), load average 11-13, 10,000 deliveries to one intake and to
// three: 15.5 and 5.4 deliveries a group with one worker, 9.3 and 3.1
// with two; CPU per delivery over both, Go 0.21-0.24 ms and PostgreSQL
// 0.18-0.26 ms with one worker, 0.25-0.27 ms and 0.34-0.37 ms with two. Lingering after a commit for more deliveries to queue (as
// the bbolt committer does) made no larger groups: under load the queue
// is never empty.
const groupWorkers = 1

// maxGroup bounds the deliveries of one group transaction.
const maxGroup = 64

// groupOutcome is what a group commit made of a delivery.
type groupOutcome int

const (
	groupCommitted groupOutcome = iota // committed with its runs
	groupSeen                          // a key was recorded: nothing written
	groupFailed                        // the group was refused: nothing written
)

// groupReq is a delivery waiting for a group commit.
type groupReq struct {
	d       state.Delivery
	now     time.Time
	locks   []int64
	records [][]byte
	events  [][][]byte
	done    []byte // the value of d.Key: d.Done of every run created

	outcome groupOutcome
	err     error
}

// newDeliveryQueue returns s's queue of new deliveries: groupWorkers
// groups in flight, each of up to maxGroup deliveries whose keys are
// disjoint. A caller whose ctx ends returns at once: once its delivery
// was taken, whether it committed is then unknown (as for any transaction
// whose commit was not heard).
func newDeliveryQueue(s *Store) *groupQueue[*groupReq] {
	return &groupQueue[*groupReq]{workers: groupWorkers, max: maxGroup, fits: disjointKeys, send: s.commitGroup}
}

// disjointKeys returns a new delivery group's rule: deliveries none of
// whose keys is a member's.
func disjointKeys() func(*groupReq) bool {
	keys := map[int64]bool{}
	return func(r *groupReq) bool {
		if slices.ContainsFunc(r.locks, func(k int64) bool { return keys[k] }) {
			return false
		}
		for _, k := range r.locks {
			keys[k] = true
		}
		return true
	}
}

// DeliveryGroups returns how many group transactions the store has sent
// for new webhook deliveries and how many deliveries they held (their
// ratio is the mean group size, for benchmarks).
func (s *Store) DeliveryGroups() (groups, deliveries int64) {
	return s.groups.Groups()
}

// commitGroup commits group in one transaction of four statements sent in
// one round trip (one batch: one implicit transaction, see send): the
// advisory locks of every member's keys, in order (see claimLocks; the
// members' keys are disjoint); the snapshots; the claims, runs, events,
// bodies and free concurrency keys of every member none of whose keys is
// recorded, in one statement that answers the members left out and the
// runs that took their key; a prune. It sets each member's outcome, or
// its error when the database could not be asked. Every group counts in
// DeliveryGroups.
func (s *Store) commitGroup(ctx context.Context, group []*groupReq) bool {
	var rows groupRows
	for i, r := range group {
		rows.add(int32(i), r)
	}
	args := rows.args()
	hashes, sources := rows.snapshots(&s.snapshots)
	seen := map[int32]bool{}
	b := &pgx.Batch{}
	b.Queue(lockClaims, rows.locks())
	if len(hashes) > 0 {
		b.Queue(groupSnapshots, hashes, sources)
	}
	var took []string
	b.Queue(groupInsert, args...).Query(func(rs pgx.Rows) error {
		clear(seen) // the batch may be sent again (see send)
		took = took[:0]
		for rs.Next() {
			var m *int32
			var owner *string
			if err := rs.Scan(&m, &owner); err != nil {
				return err
			}
			if m != nil {
				seen[*m] = true
			} else if owner != nil {
				took = append(took, *owner)
			}
		}
		return rs.Err()
	})
	s.queuePrune(b, rows.latest) // last: see prune
	err := s.send(ctx, b)
	if err == nil {
		s.snapshots.add(hashes...)
		rows.keepKeys(&s.committedKeys, took)
	}
	var pe *pgconn.PgError
	for i, r := range group {
		switch {
		case err == nil && seen[int32(i)]:
			r.outcome = groupSeen
		case err == nil:
			r.outcome = groupCommitted
		case errors.As(err, &pe):
			r.outcome = groupFailed
		default:
			r.err = err
		}
	}
	return true
}

// groupSnapshots stores the snapshots $1/$2, skipping hashes taken: one
// row per distinct hash and source, sorted by hash, so that two groups
// storing the same new hashes store them in one order and never wait
// for each other in a cycle. A snapshot is stored even when the
// delivery whose run has it is left out (a redelivery, whose playbook's
// snapshot is almost always stored already): runbook_snapshots keeps
// sources by hash for whatever run refers to them, and a source kept
// for none costs its row only.
const groupSnapshots = `INSERT INTO runbook_snapshots (hash, source)
SELECT * FROM unnest($1::text[], $2::bytea[])
ON CONFLICT (hash) DO NOTHING`

// groupInsert writes the claims, runs, events and bodies of the members
// whose delivery key is not recorded (live or expired), and returns the
// members whose key is. It finds them without reading runbook_dedup: a
// delivery key is inserted ON CONFLICT DO NOTHING, which decides on the
// primary key's index, and a member is new when its key's row comes back.
// (A join of the claims with runbook_dedup was planned, in the statement's
// generic plan cached while the table was small, as a hash join over a
// sequential scan of the whole table: perf showed it on top for three
// replicas.) A new member's hook claims are plain inserts: a hook already
// recorded (delivered before under another delivery key) fails the
// statement, and with it the group. The run columns and values are those
// of insertRun, one row per run; a run's events are numbered from 1 and
// its last_seq is their number. Data-modifying WITH queries all run to
// completion and see the same snapshot: runs' snapshot column sees the
// snapshots stored by the statement before.
//
// The statement also takes, in the name of each run it inserted that is
// committed already claimed and keyed (state.DeliveryUnit), the run's
// concurrency key when it is free: a keyed run then takes its key with
// no transaction of its own (committedKeys; a lock group's transaction
// before, about two in five of an sms-unsubscribe run's transactions). The
// keys are inserted in key order, as a lock group inserts them (see
// lockGroup), so that the two never wait for each other in a cycle; of
// two runs of the group with one key, the first created takes it. A key
// held already is left to the run's AcquireLock, which looks at its
// holder (on_busy).
const groupInsert = `WITH claim AS (
	SELECT * FROM unnest($1::int[], $2::text[], $3::timestamptz[], $4::timestamptz[], $5::bytea[], $30::bool[])
		AS c(member, key, first_seen, expires_at, value, delivery)
), delivery_claims AS (
	INSERT INTO runbook_dedup (key, first_seen, expires_at, value)
	SELECT key, first_seen, expires_at, value FROM claim WHERE delivery
	ON CONFLICT (key) DO NOTHING
	RETURNING key
), fresh AS (
	SELECT c.member FROM claim c WHERE c.delivery AND c.key IN (SELECT key FROM delivery_claims)
), hook_claims AS (
	INSERT INTO runbook_dedup (key, first_seen, expires_at, value)
	SELECT key, first_seen, expires_at, value FROM claim WHERE NOT delivery AND member IN (SELECT member FROM fresh)
), runs AS (
	INSERT INTO runbook_runs (` + runColumns + `, last_seq)
	SELECT u.id, u.playbook, u.status, u.parent_id, u.trigger_type, u.trigger_key, u.concurrency_key, u.owner,
		u.created_ns, u.created_at, u.started_at, u.ended_at, u.hash,
		CASE WHEN u.hash <> '' AND EXISTS (SELECT FROM runbook_snapshots s WHERE s.hash = u.hash AND s.source = u.source)
			THEN NULL ELSE u.source END,
		u.record, u.last_seq
	FROM unnest($6::int[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[],
		$15::bigint[], $16::timestamptz[], $17::timestamptz[], $18::timestamptz[], $19::text[], $20::bytea[], $21::json[], $22::bigint[])
		AS u(member, id, playbook, status, parent_id, trigger_type, trigger_key, concurrency_key, owner,
			created_ns, created_at, started_at, ended_at, hash, source, record, last_seq)
	WHERE u.member IN (SELECT member FROM fresh)
	RETURNING id
), events AS (
	INSERT INTO runbook_events (run_id, seq, event)
	SELECT e.run_id, e.seq, e.event FROM unnest($23::text[], $24::bigint[], $25::json[]) AS e(run_id, seq, event)
	WHERE e.run_id IN (SELECT id FROM runs)
), bodies AS (
	INSERT INTO runbook_deliveries (id, body, created_at)
	SELECT b.id, b.body, b.created_at FROM unnest($26::int[], $27::text[], $28::bytea[], $29::timestamptz[])
		AS b(member, id, body, created_at)
	WHERE b.member IN (SELECT member FROM fresh)
), took AS (
	INSERT INTO runbook_locks (key, owner, process, since, record)
	SELECT k.key, k.owner, k.process, k.since, k.record
	FROM unnest($31::text[], $32::text[], $33::text[], $34::timestamptz[], $35::json[]) WITH ORDINALITY
		AS k(key, owner, process, since, record, n)
	WHERE k.owner IN (SELECT id FROM runs)
	ORDER BY k.n
	ON CONFLICT (key) DO NOTHING
	RETURNING owner
)
SELECT member, NULL::text FROM claim WHERE delivery AND member NOT IN (SELECT member FROM fresh)
UNION ALL SELECT NULL::int, owner FROM took`

// groupRows are a group's rows, column by column, for groupSnapshots and
// groupInsert.
type groupRows struct {
	claimMember []int32
	claimKey    []string
	claimFirst  []time.Time
	claimExpiry []*time.Time
	claimValue  [][]byte
	claimOfKey  []bool // the delivery's key, not a hook's

	snaps []snapshotRow

	runMember                                       []int32
	id, playbook, status, parent, trigType, trigKey []string
	concurrency, owner, hash                        []string
	createdNs, lastSeq                              []int64
	createdAt                                       []time.Time
	startedAt, endedAt                              []*time.Time
	source, record                                  [][]byte
	evRun                                           []string
	evSeq                                           []int64
	evData                                          [][]byte
	bodyMember                                      []int32
	bodyID                                          []string
	bodyData                                        [][]byte
	bodyAt                                          []time.Time
	latest                                          time.Time
	lockKeys                                        []int64
	keys                                            []keyRow
}

// keyRow is a concurrency key a group takes for a run, when it is free.
type keyRow struct {
	key, run, process string
	since             time.Time
	created           time.Time
}

// add appends member m's rows: its claims, runs, events and body.
func (g *groupRows) add(m int32, r *groupReq) {
	d := r.d
	if r.now.After(g.latest) {
		g.latest = r.now
	}
	g.lockKeys = append(g.lockKeys, r.locks...)
	expires, _ := claimTimes(r.now, d.TTL)
	g.addClaim(m, d.Key, r.now, expires, r.done, true)
	for i, u := range d.Units {
		if u.Claim != "" {
			g.addClaim(m, u.Claim, r.now, expires, u.ClaimValue, false)
		}
		run := u.Run
		if hasSnapshot(run) {
			g.addSnapshot(run.Hash, run.Snapshot)
		}
		g.addRun(m, run, r.records[i], int64(len(r.events[i])))
		if run.Owner != "" && run.ConcurrencyKey != "" && run.Status == state.RunPending {
			g.keys = append(g.keys, keyRow{key: run.ConcurrencyKey, run: run.ID, process: run.Owner, since: r.now, created: run.CreatedAt})
		}
		for n, ev := range r.events[i] {
			g.evRun, g.evSeq, g.evData = append(g.evRun, run.ID), append(g.evSeq, int64(n+1)), append(g.evData, ev)
		}
	}
	if len(d.Units) > 0 && d.ID != "" {
		g.bodyMember, g.bodyID = append(g.bodyMember, m), append(g.bodyID, d.ID)
		g.bodyData, g.bodyAt = append(g.bodyData, orEmpty(d.Body)), append(g.bodyAt, r.now)
	}
}

func (g *groupRows) addClaim(m int32, key string, now time.Time, expires *time.Time, val []byte, ofKey bool) {
	g.claimMember, g.claimKey, g.claimFirst = append(g.claimMember, m), append(g.claimKey, key), append(g.claimFirst, now)
	g.claimExpiry, g.claimValue, g.claimOfKey = append(g.claimExpiry, expires), append(g.claimValue, val), append(g.claimOfKey, ofKey)
}

// addRun appends run r's row with the values runArgs gives insertRun.
func (g *groupRows) addRun(m int32, r *state.Run, record []byte, events int64) {
	triggerType, triggerKey := runTrigger(r)
	g.runMember = append(g.runMember, m)
	g.id, g.playbook, g.status = append(g.id, r.ID), append(g.playbook, r.Playbook), append(g.status, string(r.Status))
	g.parent, g.trigType, g.trigKey = append(g.parent, r.ParentID), append(g.trigType, triggerType), append(g.trigKey, triggerKey)
	g.concurrency, g.owner, g.hash = append(g.concurrency, r.ConcurrencyKey), append(g.owner, r.Owner), append(g.hash, r.Hash)
	g.createdNs, g.createdAt = append(g.createdNs, r.CreatedAt.UnixNano()), append(g.createdAt, r.CreatedAt)
	g.startedAt, g.endedAt = append(g.startedAt, nullTime(r.StartedAt)), append(g.endedAt, nullTime(r.EndedAt))
	g.source, g.record, g.lastSeq = append(g.source, runSource(r)), append(g.record, record), append(g.lastSeq, events)
}

// locks returns the advisory lock keys of every member, ascending (the
// members' keys are disjoint).
func (g *groupRows) locks() []int64 {
	slices.Sort(g.lockKeys)
	return g.lockKeys
}

// args returns groupInsert's arguments.
func (g *groupRows) args() []any {
	args := []any{
		g.claimMember, g.claimKey, g.claimFirst, g.claimExpiry, g.claimValue,
		g.runMember, g.id, g.playbook, g.status, g.parent, g.trigType, g.trigKey, g.concurrency, g.owner,
		g.createdNs, g.createdAt, g.startedAt, g.endedAt, g.hash, g.source, g.record, g.lastSeq,
		g.evRun, g.evSeq, g.evData,
		g.bodyMember, g.bodyID, g.bodyData, g.bodyAt,
		g.claimOfKey,
	}
	return append(args, g.keyArgs()...)
}

// keyArgs returns groupInsert's concurrency key arguments, in key order
// and, for one key, the first created run first (see groupInsert). A
// lock whose record does not encode (a time JSON cannot hold) is left
// to the run's AcquireLock.
func (g *groupRows) keyArgs() []any {
	slices.SortFunc(g.keys, func(a, b keyRow) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		if c := a.created.Compare(b.created); c != 0 {
			return c
		}
		return strings.Compare(a.run, b.run)
	})
	var keys, runs, processes []string
	var since []time.Time
	var records [][]byte
	for _, k := range g.keys {
		rec, err := json.Marshal(state.Lock{Key: k.key, Owner: k.run, Process: k.process, Since: k.since})
		if err != nil {
			continue
		}
		keys, runs, processes = append(keys, k.key), append(runs, k.run), append(processes, k.process)
		since, records = append(since, k.since), append(records, rec)
	}
	return []any{keys, runs, processes, since, records}
}

// keepKeys keeps in ck the keys that runs took in the group's commit
// (took: their IDs).
func (g *groupRows) keepKeys(ck *committedKeys, took []string) {
	for _, id := range took {
		if i := slices.IndexFunc(g.keys, func(k keyRow) bool { return k.run == id }); i >= 0 {
			ck.keep(id, g.keys[i].key)
		}
	}
}

// snapshotRow is a playbook source a group stores, by its hash.
type snapshotRow struct {
	hash   string
	source []byte
}

// addSnapshot adds a snapshot row unless the group has it.
func (g *groupRows) addSnapshot(hash string, source []byte) {
	row := snapshotRow{hash, source}
	if !slices.ContainsFunc(g.snaps, func(r snapshotRow) bool { return r.hash == hash && bytes.Equal(r.source, source) }) {
		g.snaps = append(g.snaps, row)
	}
}

// snapshots returns groupSnapshots' arguments: the hashes and sources of
// the snapshot rows not seen committed (stored), ordered by hash.
func (g *groupRows) snapshots(stored *storedSnapshots) (hashes []string, sources [][]byte) {
	slices.SortStableFunc(g.snaps, func(a, b snapshotRow) int { return strings.Compare(a.hash, b.hash) })
	for _, r := range g.snaps {
		if stored.has(r.hash) {
			continue
		}
		hashes, sources = append(hashes, r.hash), append(sources, r.source)
	}
	return hashes, sources
}
