package state

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Coordinator is what the processes sharing one store coordinate
// through: a lease per replica, the durable run queue, a leader lease and
// notices. Only a store that several processes use at once implements it
// (PostgreSQL); a server whose store does not (bbolt, held by one
// process) executes every unfinished run itself.
//
// Every process that executes runs on it is a replica: a `runbook serve`
// process (ReplicaServe), or a `runbook run` process (ReplicaRun), a
// short-lived replica that executes only its own runs. A replica is named
// by its process ID (engine Options.Process, "host/pid@start"), which is
// also the Owner its runs are recorded with. Times are the store's clock,
// so the replicas' clocks need not agree.
type Coordinator interface {
	// KeepReplica records that replica, of kind, lives until ttl from now.
	KeepReplica(ctx context.Context, replica string, kind ReplicaKind, ttl time.Duration) error
	// DropReplica ends replica's lease now (it leaves): its unfinished
	// runs may be taken by the other replicas at once (a run replica's as
	// ClaimRuns says).
	DropReplica(ctx context.Context, replica string) error
	// Replica returns the kind of replica owner is (or was), alive or
	// not, and whether its lease expired; kind is empty when owner never
	// was a replica.
	Replica(ctx context.Context, owner string) (kind ReplicaKind, expired bool, err error)

	// ClaimRun makes replica the owner of the unfinished top-level run id
	// and reports whether it is: the run has no owner, is replica's
	// already (then whatever its status), or its owner is a serve replica
	// whose lease expired. With adopt (an explicit resume) any owner but a
	// live replica is taken over: a run replica whose lease expired, or an
	// owner that never was a replica; a live replica's run never is.
	ClaimRun(ctx context.Context, id, replica string, adopt bool) (bool, error)
	// ClaimRuns takes at most limit runs for replica to execute, oldest
	// first, skipping rows other replicas are claiming (SKIP LOCKED):
	// unfinished top-level runs without an owner (pending ones only once
	// older than pendingAge, which leaves the replica that committed them
	// time to launch them itself), replica's own pending runs older than
	// pendingAge (committed already claimed, whose launch was lost: a
	// commit whose answer was not heard), and runs owned by a replica
	// whose lease expired, but not before the store has been up for
	// pendingAge (the replicas' lease) after a restart: a lease that
	// expired while the store was down is its owner's to renew first. It
	// returns their IDs.
	// The runs of a run replica (runbook run) whose lease expired are
	// taken only when their playbook opted in (Run.TakeOver), or all of
	// them with processes.
	ClaimRuns(ctx context.Context, replica string, limit int, pendingAge time.Duration, processes bool) ([]string, error)
	// LetGo gives up replica's ownership of those of the runs ids it owns
	// (a draining replica hands its parked and queued runs over): they
	// have no owner then, and the replicas are told there are runs to
	// take. It returns how many it let go.
	LetGo(ctx context.Context, replica string, ids []string) (int, error)

	// Lead takes (term 0) or renews (the term it returned) the lease
	// name for holder, for ttl. It returns the term held, or 0 when
	// another holder's lease has not expired or the term was lost.
	Lead(ctx context.Context, name, holder string, term int64, ttl time.Duration) (int64, error)
	// Resign gives up the lease if holder still holds it with term.
	Resign(ctx context.Context, name, holder string, term int64) error

	// Listen calls fn for each notice until ctx ends; it returns ctx's
	// error, or the error that broke the connection (the caller listens
	// again, and polls meanwhile). Its first notice is NoticeListening,
	// once every channel is listened to: notices sent before it may be
	// lost.
	Listen(ctx context.Context, fn func(Notice)) error
	// Notify sends n to every listening replica.
	Notify(ctx context.Context, n Notice) error
	// Missed reads what notices about runs (the top-level runs a replica
	// executes or holds parked) and their sub-playbook runs may have told
	// while the replica did not listen, in one query: the runs recorded
	// cancelled, and the unfinished ones with an answer (one that needs
	// no more answers) to an approval step still waiting.
	Missed(ctx context.Context, runs []string) (Missed, error)
	// Unfinished lists the unfinished top-level runs of playbook that a
	// process executes or will (a schedule's overlap policy): pending,
	// running, waiting or suspended, owned by nobody (the queue), by a
	// serve replica (alive, or dead and about to be taken over) or by a
	// run replica whose lease lives (runbook run). The run of a run
	// replica that is gone (shown interrupted) is not among them.
	Unfinished(ctx context.Context, playbook string) ([]string, error)
	// CountUnfinished counts the unfinished top-level runs of every
	// playbook by status (pending, running, waiting, suspended), whoever
	// executes them: the whole store's view that one replica exports.
	CountUnfinished(ctx context.Context) (map[RunStatus]int, error)
}

// ReplicaKind is what a replica is: a `runbook serve` process, which
// takes runs from the queue, or a `runbook run` process, which executes
// only its own runs and whose runs are taken over only on request.
type ReplicaKind string

// The kinds of replica.
const (
	ReplicaServe ReplicaKind = "serve"
	ReplicaRun   ReplicaKind = "run"
)

// Missed is what Coordinator.Missed found: the notices to act on again.
type Missed struct {
	Cancelled []string // NoticeCancel: recorded cancelled
	Answered  []string // NoticeApproval: an approval step waiting has its answer
}

// NoticeKind is what a notice is about.
type NoticeKind string

// The kinds of notice. The store sends NoticeApproval when an approval is
// recorded, NoticeCancel when a run is recorded cancelled and
// NoticeKeyFreed when a concurrency key that someone asked for while it
// was held is released (AcquireLock's refusal marks it) and NoticePause when a
// run pause is recorded or deleted, whoever wrote them;
// NoticeWork, NoticeResume and NoticeAgent are sent by the replicas.
const (
	NoticeWork     NoticeKind = "work"     // runs to take: a replica released its runs, a run was queued
	NoticeApproval NoticeKind = "approval" // run RunID got an approval answer
	NoticeCancel   NoticeKind = "cancel"   // run RunID was cancelled
	NoticeKeyFreed NoticeKind = "key"      // concurrency key Key was released (empty: some key)
	NoticeResume   NoticeKind = "resume"   // run RunID, parked on its owner, was resumed through another replica
	NoticePause    NoticeKind = "pause"    // a run pause (RunID: its ID) was recorded or lifted
	NoticeAgent    NoticeKind = "agent"    // runbook agents: Key says what changed (internal/agent)
	// NoticeListening comes from Listen itself, first: from now on no
	// notice is lost.
	NoticeListening NoticeKind = "listening"
)

// Notice is one notification between replicas.
type Notice struct {
	Kind  NoticeKind
	RunID string // empty for NoticeWork, NoticeKeyFreed and NoticeAgent
	Key   string // NoticeKeyFreed's key, NoticeAgent's subject
}

// ErrCancelledMeanwhile refuses a write of a run recorded cancelled since
// the writer read it: a store shared by several processes refuses to
// record any other status over a cancellation the write did not see (its
// record does not carry the cancellation's EndedAt), so the process
// executing the run cannot overwrite a cancel recorded by another one
// (a replica, `runbook runs cancel`). Writing the run cancelled is never
// refused. The writer then cancels its execution (see engine).
var ErrCancelledMeanwhile = errors.New("run recorded cancelled meanwhile")

// ErrEndedMeanwhile refuses a cancellation of a run that ended otherwise
// (succeeded, failed, skipped) since the writer read it: a store shared by
// several processes never records a cancel over an end the write did not
// see, so a cancel racing the run's last step on another process cannot
// turn a success into a cancellation. Errors that are it are
// *EndedMeanwhileError, which says how the run ended.
var ErrEndedMeanwhile = errors.New("run ended meanwhile")

// EndedMeanwhileError is ErrEndedMeanwhile for run Run, which ended Status.
type EndedMeanwhileError struct {
	Run    string
	Status RunStatus
}

func (e *EndedMeanwhileError) Error() string {
	return fmt.Sprintf("run %s is already %s", e.Run, e.Status)
}

// Is makes an EndedMeanwhileError ErrEndedMeanwhile.
func (e *EndedMeanwhileError) Is(target error) bool { return target == ErrEndedMeanwhile }
