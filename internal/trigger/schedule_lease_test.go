package trigger

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

// replicaStarter is one replica's Preparer: its runs are committed by the
// scheduler with their slot's claim; it records the slots it launched.
type replicaStarter struct {
	prefix string
	mu     sync.Mutex
	seq    int
	slots  []string
}

func (s *replicaStarter) Prepare(_ context.Context, req StartRequest) (*state.Run, []state.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return &state.Run{ID: fmt.Sprintf("%s-%d", s.prefix, s.seq), Playbook: req.Playbook.Name, Trigger: req.Trigger, Status: state.RunPending},
		[]state.Event{{Type: "run.created"}}, nil
}

func (s *replicaStarter) Launch(runs ...*state.Run) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range runs {
		s.slots = append(s.slots, r.Trigger["slot"].(string))
	}
}

func (s *replicaStarter) Start(context.Context, StartRequest) (string, error) {
	panic("a leased scheduler commits its runs with their slot's claim")
}
func (s *replicaStarter) Active(string) []string { return nil }
func (s *replicaStarter) Cancel(string)          {}

func (s *replicaStarter) launched() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.slots)
}

// memLeader is a leader lease in memory with terms and expiry, as the
// PostgreSQL store keeps it; grantAll makes every caller a leader (a
// lease that failed to exclude: correctness must not depend on it), and
// a holder in noResign dies without resigning.
type memLeader struct {
	mu       sync.Mutex
	grantAll bool
	holder   string
	term     int64
	expires  time.Time
	noResign map[string]bool
}

func (l *memLeader) Lead(_ context.Context, _, holder string, term int64, ttl time.Duration) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	switch {
	case l.grantAll:
		return 1, nil
	case term == 0 && (l.holder == "" || now.After(l.expires)):
		l.holder, l.term, l.expires = holder, l.term+1, now.Add(ttl)
		return l.term, nil
	case term != 0 && term == l.term && holder == l.holder:
		l.expires = now.Add(ttl)
		return term, nil
	}
	return 0, nil
}

func (l *memLeader) Resign(_ context.Context, _, holder string, term int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.noResign[holder] && holder == l.holder && term == l.term {
		l.expires = time.Time{}
	}
	return nil
}

// replicaScheduler runs a leased scheduler of every second's slot
// (catch-up: all) over st until the returned stop is called.
func replicaScheduler(t *testing.T, st state.Store, l Leader, starter *replicaStarter) (stop func()) {
	t.Helper()
	pb := book(t, "tick", `{cron: "* * * * * *", catchup: all}`)
	s := NewScheduler(SchedulerOptions{Store: st, Starter: starter, Leader: l, Holder: starter.prefix, LeaderTTL: 600 * time.Millisecond})
	s.Set([]*playbook.Playbook{pb})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	return func() { cancel(); <-done }
}

// secondsBetween lists every whole second from first to last (RFC 3339).
func secondsBetween(t *testing.T, first, last string) []string {
	a, err := time.Parse(time.RFC3339, first)
	require.NoError(t, err)
	b, err := time.Parse(time.RFC3339, last)
	require.NoError(t, err)
	var out []string
	for x := a; !x.After(b); x = x.Add(time.Second) {
		out = append(out, x.UTC().Format(time.RFC3339))
	}
	return out
}

func openShared(t *testing.T) state.Store {
	st, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// Two replicas that both believe they lead fire each slot once: the slot's
// claim, committed with its run, decides.
func TestTwoLeadersFireEachSlotOnce(t *testing.T) {
	st := openShared(t)
	l := &memLeader{grantAll: true}
	a, b := &replicaStarter{prefix: "a"}, &replicaStarter{prefix: "b"}
	stopA := replicaScheduler(t, st, l, a)
	stopB := replicaScheduler(t, st, l, b)
	time.Sleep(3500 * time.Millisecond)
	stopA()
	stopB()

	all := append(a.launched(), b.launched()...)
	slices.Sort(all)
	require.GreaterOrEqual(t, len(all), 3, "a: %v b: %v", a.launched(), b.launched())
	assert.Equal(t, secondsBetween(t, all[0], all[len(all)-1]), all, "each second's slot once, none skipped")
	runs, err := st.ListRuns(context.Background(), state.RunFilter{})
	require.NoError(t, err)
	assert.Len(t, runs, len(all), "a run per slot, none committed twice")
}

// The leader dies without resigning: the other replica takes the lease
// once it expires and catches up the slots missed meanwhile, each once.
func TestANewLeaderCatchesUpTheSlotsOfADeadOne(t *testing.T) {
	st := openShared(t)
	l := &memLeader{noResign: map[string]bool{"a": true}}
	a, b := &replicaStarter{prefix: "a"}, &replicaStarter{prefix: "b"}
	stopA := replicaScheduler(t, st, l, a)
	time.Sleep(100 * time.Millisecond) // a leads
	stopB := replicaScheduler(t, st, l, b)
	time.Sleep(2200 * time.Millisecond)
	require.Empty(t, b.launched(), "b does not fire while a leads")
	stopA() // a dies; its lease lasts 600 ms more
	killed := time.Now()
	time.Sleep(2500 * time.Millisecond)
	stopB()

	require.NotEmpty(t, a.launched())
	require.NotEmpty(t, b.launched(), "b took over")
	all := append(a.launched(), b.launched()...)
	slices.Sort(all)
	assert.Equal(t, secondsBetween(t, all[0], all[len(all)-1]), all, "no slot skipped or fired twice across the handover")
	last, err := time.Parse(time.RFC3339, all[len(all)-1])
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now(), last, 1500*time.Millisecond, "b fires up to now (killed at %s)", killed.Format(time.RFC3339Nano))
}

// notNowLeader grants the lease until refuse is set, then answers
// ErrNotNow, as a replica fencing itself does.
type notNowLeader struct {
	memLeader
	refuse sync.Mutex
	no     bool
}

func (l *notNowLeader) Lead(ctx context.Context, name, holder string, term int64, ttl time.Duration) (int64, error) {
	l.refuse.Lock()
	no := l.no
	l.refuse.Unlock()
	if no {
		return 0, fmt.Errorf("%w: test", ErrNotNow)
	}
	return l.memLeader.Lead(ctx, name, holder, term, ttl)
}

// A scheduler told it may not lead for now (ErrNotNow) stops leading at
// its next renewal and says why, not that another replica took the lease;
// once allowed again it leads again (when its old lease has run out).
func TestASchedulerThatMayNotLeadStopsAtItsNextRenewal(t *testing.T) {
	st := openShared(t)
	l := &notNowLeader{}
	var logs syncBuffer
	s := NewScheduler(SchedulerOptions{Store: st, Starter: &replicaStarter{prefix: "a"}, Leader: l, Holder: "a",
		LeaderTTL: time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	s.Set([]*playbook.Playbook{book(t, "tick", `{cron: "* * * * * *"}`)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	require.Eventually(t, s.Leading, 2*time.Second, 10*time.Millisecond)

	l.refuse.Lock()
	l.no = true
	l.refuse.Unlock()
	require.Eventually(t, func() bool { return !s.Leading() }, 5*time.Second, 10*time.Millisecond, "stops leading")
	assert.Contains(t, logs.String(), "scheduler lease given up")
	assert.NotContains(t, logs.String(), "lost to another replica")

	l.refuse.Lock()
	l.no = false
	l.refuse.Unlock()
	require.Eventually(t, s.Leading, 5*time.Second, 10*time.Millisecond, "leads again once allowed")
}

// syncBuffer is a bytes.Buffer safe for a logger and a test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
