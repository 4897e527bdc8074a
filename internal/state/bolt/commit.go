package bolt

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	bbolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// maxGroup bounds how many update functions share one transaction.
const maxGroup = 256

// committer is a Store's single writer: callers queue update functions and
// wait; the writer takes the oldest one and whatever else is queued (up to
// maxGroup), runs them in one bbolt transaction and answers each, so
// concurrent writers share one commit (one fsync). After a commit of
// several writes it waits up to a millisecond for as many to queue (see
// linger). A lone caller — nothing queued, no commit under way, the last
// group under lingerFrom — commits its update itself, on its own
// goroutine: handing it to the writer would cost two thread wake-ups (the
// writer's, then the caller's) for a group of one. Callers that come
// meanwhile queue for the writer, which takes them once that commit is
// done, so they still share the next one.
//
// Urgent updates (a webhook delivery's claims and runs, whose sender waits
// for the answer) have a lane of their own: the writer takes them before
// the others, alone, so an acknowledgement waits for at most the commit in
// flight and its own small one, never behind a queue of step writes. A
// group of urgent updates alone is followed by a group that serves the
// other lane first when it is waiting, so step writes are never starved.
//
// When a function returns an error the transaction is rolled back, its
// caller gets the error and the others run again in the next transaction;
// update functions must therefore be safe to run more than once. A panic
// (bbolt reading a damaged page) fails the whole group with
// state.ErrCorrupt.
type committer struct {
	s *Store

	lingerFor time.Duration // lingerFor; tests set it longer

	mu     sync.Mutex
	queue  []*writeReq
	urgent []*writeReq
	// urgentLast says the last group was urgent updates alone: the next
	// one serves the queue first.
	urgentLast bool
	closed     bool
	// committing: a group is being committed, by the writer or by a lone
	// caller (do); last is the size of the group committed last.
	committing bool
	last       int
	wake       chan struct{} // capacity 1: work queued or closing
	done       chan struct{} // closed when the writer has exited
}

// writeReq is one queued update. taken and abandoned are guarded by
// committer.mu: a request is either taken by the writer (and then answered
// on errc) or abandoned by its caller first (and then never run).
type writeReq struct {
	fn        func(tx *bbolt.Tx) error
	errc      chan error // capacity 1
	taken     bool
	abandoned bool
}

func startCommitter(s *Store, linger time.Duration) *committer {
	c := &committer{s: s, lingerFor: linger, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go c.loop()
	return c
}

// do queues fn (in the urgent lane when urgent) and waits for its
// outcome, or, from a lone caller, commits it at once. A ctx that ends
// before the writer takes fn returns ctx.Err() and fn never runs; once
// taken, fn's outcome is awaited whatever ctx does.
func (c *committer) do(ctx context.Context, fn func(tx *bbolt.Tx) error, urgent bool) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return fmt.Errorf("state file %s: %w", c.s.path, berrors.ErrDatabaseNotOpen)
	}
	if !c.committing && c.last < lingerFrom && len(c.queue) == 0 && len(c.urgent) == 0 {
		c.committing = true
		c.mu.Unlock()
		_, err := c.run([]*writeReq{{fn: fn}}) // alone: its error is the outcome either way
		c.committed(1)
		return err
	}
	r := &writeReq{fn: fn, errc: make(chan error, 1)}
	if urgent {
		c.urgent = append(c.urgent, r)
	} else {
		c.queue = append(c.queue, r)
	}
	c.mu.Unlock()
	c.signal()
	select {
	case err := <-r.errc:
		return err
	case <-ctx.Done():
	}
	c.mu.Lock()
	if !r.taken {
		r.abandoned = true
		c.mu.Unlock()
		return ctx.Err()
	}
	c.mu.Unlock()
	return <-r.errc
}

// committed ends the commit of a group of n: the writer is woken when
// updates queued meanwhile or the committer is closing.
func (c *committer) committed(n int) {
	c.mu.Lock()
	c.committing, c.last = false, n
	wake := len(c.queue) > 0 || len(c.urgent) > 0 || c.closed
	c.mu.Unlock()
	if wake {
		c.signal()
	}
}

func (c *committer) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// close makes later calls fail, lets the writer answer everything already
// queued, and waits for it to exit. It is safe to call more than once.
func (c *committer) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.signal()
	<-c.done
}

func (c *committer) loop() {
	defer close(c.done)
	for {
		c.mu.Lock()
		last := c.last
		c.mu.Unlock()
		if last >= lingerFrom {
			c.linger(last)
		}
		group, closed := c.take()
		if len(group) > 0 {
			c.commit(group)
			c.committed(len(group))
			continue
		}
		if closed {
			return
		}
		<-c.wake
	}
}

// Under concurrent writes the writer lingers before taking a group: the
// writers its last commit answered are busy preparing their next write
// and would otherwise land in a string of small commits, each paying the
// two fsyncs. A lone writer (last group under lingerFrom) never waits.
const (
	lingerFrom = 4
	lingerFor  = time.Millisecond
)

// linger waits until want updates are queued, lingerFor has passed, an
// urgent update is queued or the committer closes.
func (c *committer) linger(want int) {
	t := time.NewTimer(c.lingerFor)
	defer t.Stop()
	for {
		c.mu.Lock()
		n, urgent, closed := len(c.queue), len(c.urgent), c.closed
		c.mu.Unlock()
		if n >= want || urgent > 0 || closed {
			return
		}
		select {
		case <-c.wake: // consumed here; take runs next either way
		case <-t.C:
			return
		}
	}
}

// take removes up to maxGroup live requests and marks them taken: urgent
// ones alone, unless the last group was urgent ones alone and others wait;
// then both lanes, the queue first. It takes none while a lone caller
// commits (committed wakes the writer after). closed reports whether the
// committer is closing with nothing left to commit.
func (c *committer) take() (group []*writeReq, closed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.committing {
		return nil, false
	}
	switch {
	case len(c.urgent) > 0 && !(c.urgentLast && len(c.queue) > 0):
		group = takeLane(&c.urgent, group)
		c.urgentLast = true
	default:
		group = takeLane(&c.queue, group)
		group = takeLane(&c.urgent, group)
		c.urgentLast = false
	}
	c.committing = len(group) > 0
	return group, c.closed
}

// takeLane moves live requests from the front of lane into group, up to
// maxGroup in all.
func takeLane(lane *[]*writeReq, group []*writeReq) []*writeReq {
	q := *lane
	n := 0
	for n < len(q) && len(group) < maxGroup {
		r := q[n]
		n++
		if r.abandoned {
			continue
		}
		r.taken = true
		group = append(group, r)
	}
	clear(q[:n])
	q = q[n:]
	if len(q) == 0 {
		q = nil // let a large backing array go
	}
	*lane = q
	return group
}

// commit runs group in one transaction, dropping (and answering) each
// request whose function fails and running the rest again, until one
// transaction commits or fails as a whole.
func (c *committer) commit(group []*writeReq) {
	for len(group) > 0 {
		failed, err := c.run(group)
		if failed >= 0 {
			group[failed].errc <- err
			group = append(group[:failed], group[failed+1:]...)
			continue
		}
		for _, r := range group {
			r.errc <- err
		}
		return
	}
}

// run executes group in one read-write transaction. failed is the index of
// the function that returned err (the transaction was rolled back), or -1
// when err is the outcome of the whole group (nil: committed).
func (c *committer) run(group []*writeReq) (failed int, err error) {
	failed = -1
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			failed, err = -1, corrupt(c.s.path, fmt.Errorf("reading it failed: %v", p))
		}
	}()
	err = c.s.db.Update(func(tx *bbolt.Tx) error {
		fillAppendBuckets(tx)
		for i, r := range group {
			if err := r.fn(tx); err != nil {
				failed = i
				return err
			}
		}
		return nil
	})
	return failed, err
}

// appendBuckets are keyed by creation time (runs by their time-ordered
// IDs): new keys land after the others. Their values grow when rewritten
// (a run's record gains its end, a run's bucket its events), so their
// pages keep a tenth free. The buckets of appendOnlyBuckets take keys
// that only grow and values rewritten at the same size (an index entry's
// status is one byte), so their pages are filled whole.
var (
	appendBuckets     = [][]byte{bucketRuns, bucketRunData}
	appendOnlyBuckets = [][]byte{bucketByCreated, bucketDedupExp, bucketAudit}
)

// fillAppendBuckets makes bbolt fill the append-mostly buckets' pages to
// 90% or 100% before splitting them, instead of half: a page it splits
// keeps its keys for good, so half-full pages would double the pages each
// commit writes and the file. It sets the buckets' FillPercent, which
// lasts for the transaction (tx.Bucket hands out the same *Bucket in it).
func fillAppendBuckets(tx *bbolt.Tx) {
	for _, name := range appendBuckets {
		if b := tx.Bucket(name); b != nil {
			b.FillPercent = 0.9
		}
	}
	for _, name := range appendOnlyBuckets {
		if b := tx.Bucket(name); b != nil {
			b.FillPercent = 1
		}
	}
}
