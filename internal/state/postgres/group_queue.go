package postgres

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// One queue for every kind of group commit.
//
// Deliveries (commitGroup), fenced run writes (commitWrites) and claims
// (claimGroup) each wait in a groupQueue: a caller queues its request and
// waits; a worker takes the requests waiting at that moment, as many as
// fit one group, and sends them together. A kind states its policy in its
// queue's fields: how many groups may be in flight at once (workers), how
// many requests one group holds (max), which requests may share a group
// (fits), how a group is sent (send), and whether a caller whose ctx ends
// after its request was taken still waits for the outcome (waitTaken).
// Workers are started when requests queue and end when none is left: an
// idle Store runs no goroutine. A caller that finds no worker running
// (and a worker's place free) is the worker itself until its own request
// is answered, and leaves what queued meanwhile to a worker it starts:
// with few requests a group is one request, sent without handing it to
// another goroutine and back (two wake-ups of idle threads; see "A caller
// with no group worker" in docs/performance.md).
//
// A request abandoned by its caller (its ctx ended) before a worker took
// it is never sent. A group is sent under a context that ends only when
// every member's has (none of them alone cancels what the others share).

// groupQueue queues requests R and sends them in groups.
type groupQueue[R any] struct {
	workers int // groups in flight at once
	max     int // requests in one group
	// fits, when set, returns a new group's rule: asked in queue order of
	// each live request, it says whether the request goes in the group
	// (then it is taken) or waits for a later one.
	fits func() func(R) bool
	// send sends group, setting each member's outcome, and reports whether
	// the group counts as one in Groups (a kind that writes a group of one
	// alone does not count it).
	send func(ctx context.Context, group []R) bool
	// waitTaken: a caller whose ctx ends once its request was taken waits
	// for the outcome (it is reported, not lost); otherwise it returns
	// ctx's error and whether the request was written is unknown.
	waitTaken bool

	mu      sync.Mutex
	queue   []*queued[R]
	running int
	// hold, set by tests only, makes the next group wait until that many
	// requests are queued: whether requests arriving together meet in the
	// queue otherwise depends on how the Go scheduler runs them.
	hold int
	// groups and members count the groups sent that counted and the
	// requests they held.
	groups, members atomic.Int64
}

// queued is a request in a groupQueue. taken and abandoned are guarded by
// the queue's mu: a request is taken by a worker (and then answered) or
// abandoned by its caller first (and then never sent).
type queued[R any] struct {
	ctx       context.Context
	req       R
	answered  chan struct{}
	taken     bool
	abandoned bool
}

// do queues req and waits until it is answered (nil: req holds its
// outcome) or ctx ends first (ctx's error; see waitTaken). A caller that
// leads (see lead) sends its request itself and returns its outcome
// whatever its ctx.
func (q *groupQueue[R]) do(ctx context.Context, req R) error {
	if err := ctx.Err(); err != nil {
		return err // never sent, as a request abandoned in the queue
	}
	e := &queued[R]{ctx: ctx, req: req, answered: make(chan struct{})}
	q.mu.Lock()
	q.queue = append(q.queue, e)
	if q.running < q.workers {
		q.running++
		q.mu.Unlock()
		q.lead(e)
		return nil
	}
	q.mu.Unlock()
	select {
	case <-e.answered:
		return nil
	case <-ctx.Done():
	}
	q.mu.Lock()
	taken := e.taken
	e.abandoned = !taken
	q.mu.Unlock()
	if !taken || !q.waitTaken {
		return ctx.Err()
	}
	<-e.answered
	return nil
}

// Groups returns how many groups the queue has sent that counted and how
// many requests they held.
func (q *groupQueue[R]) Groups() (groups, members int64) {
	return q.groups.Load(), q.members.Load()
}

// waiting returns how many requests wait.
func (q *groupQueue[R]) waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue)
}

// holdNext makes the next group wait until n requests are queued.
func (q *groupQueue[R]) holdNext(n int) {
	q.mu.Lock()
	q.hold = n
	q.mu.Unlock()
}

// work sends groups until the queue is empty.
func (q *groupQueue[R]) work() {
	for q.next() {
	}
}

// lead sends groups, as a worker, until e is answered (e is queued and
// never abandoned: its caller is here), then leaves what is queued to a
// worker.
func (q *groupQueue[R]) lead(e *queued[R]) {
	defer func() {
		// A panic while sending ends the process, as it did on a worker
		// goroutine, instead of being recovered by the caller's (net/http
		// recovers a handler's) with the queue left without its worker.
		if p := recover(); p != nil {
			stack := debug.Stack() // where it panicked, for the crash's report
			go panic(fmt.Sprintf("%v\n\nsending a group:\n%s", p, stack))
			select {}
		}
	}()
	for {
		select {
		case <-e.answered:
			q.mu.Lock()
			if len(q.queue) == 0 {
				q.running--
			} else {
				go q.work()
			}
			q.mu.Unlock()
			return
		default:
		}
		if !q.next() {
			return // not reached: e, queued, is taken first
		}
	}
}

// next takes a group and sends it, and reports whether there was one
// (when not, the caller stops working: it no longer counts as running).
func (q *groupQueue[R]) next() bool {
	q.mu.Lock()
	for q.hold > 0 && len(q.queue) < q.hold {
		q.mu.Unlock()
		time.Sleep(time.Millisecond)
		q.mu.Lock()
	}
	q.hold = 0
	group := q.take()
	if len(group) == 0 {
		q.running--
		q.mu.Unlock()
		return false
	}
	q.mu.Unlock()
	q.sendGroup(group)
	return true
}

// take removes from the queue, oldest first, the live requests that fit
// one group, and marks them taken; the others stay queued in their order.
// Abandoned requests are dropped. q.mu is held.
func (q *groupQueue[R]) take() []*queued[R] {
	fits := func(R) bool { return true }
	if q.fits != nil {
		fits = q.fits()
	}
	var group []*queued[R]
	rest := q.queue[:0]
	for _, e := range q.queue {
		switch {
		case e.abandoned:
			continue
		case len(group) == q.max || !fits(e.req):
			rest = append(rest, e)
			continue
		}
		e.taken = true
		group = append(group, e)
	}
	clear(q.queue[len(rest):])
	q.queue = rest
	return group
}

// sendGroup sends group under its members' joint context and answers them.
func (q *groupQueue[R]) sendGroup(group []*queued[R]) {
	reqs := make([]R, len(group))
	ctxs := make([]context.Context, len(group))
	for i, e := range group {
		reqs[i], ctxs[i] = e.req, e.ctx
	}
	ctx, release := jointContext(ctxs)
	if q.send(ctx, reqs) {
		q.groups.Add(1)
		q.members.Add(int64(len(group)))
	}
	release()
	for _, e := range group {
		close(e.answered)
	}
}

// jointContext returns a context that ends when every one of ctxs has
// ended (none of them alone cancels a transaction the others share), and
// its release.
func jointContext(ctxs []context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	left := atomic.Int32{}
	left.Store(int32(len(ctxs)))
	stops := make([]func() bool, len(ctxs))
	for i, c := range ctxs {
		stops[i] = context.AfterFunc(c, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}
