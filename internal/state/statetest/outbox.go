package statetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// RunNotifications runs the contract of state.NotificationStore (the
// notification outbox) against stores from open, one fresh store per
// test, each with a clock the suite controls.
func RunNotifications(t *testing.T, open func(t *testing.T, now func() time.Time) state.NotificationStore) {
	t.Helper()
	opened := func(t *testing.T) (state.NotificationStore, *Clock) {
		c := NewClock(at0)
		return open(t, c.Now), c
	}
	t.Run("an event is enqueued once per key, whoever enqueues it and however often", func(t *testing.T) { testEnqueueOnce(t, opened) })
	t.Run("a claimed message is not claimed again until its claim lapses, and the lapsed claimer's outcome is refused", func(t *testing.T) { testClaimLease(t, opened) })
	t.Run("a failing message keeps its attempts and error, is due again after its backoff and is never dropped", func(t *testing.T) { testFailing(t, opened) })
	t.Run("senders claiming at once get different messages", func(t *testing.T) { testClaimConcurrent(t, opened) })
	t.Run("the history lists newest first, by status and run, a page after another", func(t *testing.T) { testListNotifications(t, opened) })
	t.Run("pruning deletes only messages sent before the bound", func(t *testing.T) { testPruneNotifications(t, opened) })
}

func note(key, run string) state.Notification {
	return state.Notification{Key: key, Event: "run.failed", Rule: "r", Channel: "c", RunID: run, Playbook: "p",
		Subject: "run " + run + " failed", Text: "text of " + key, Data: map[string]any{"run": run}}
}

func testEnqueueOnce(t *testing.T, open func(*testing.T) (state.NotificationStore, *Clock)) {
	s, _ := open(t)
	ctx := context.Background()
	added, err := s.EnqueueNotifications(ctx, []state.Notification{note("run.failed/r1@a", "r1"), note("run.failed/r1@b", "r1")})
	must(t, err)
	same(t, added, []string{"run.failed/r1@a", "run.failed/r1@b"})
	again := note("run.failed/r1@a", "r1")
	again.Text = "a second observer's text"
	added, err = s.EnqueueNotifications(ctx, []state.Notification{again, note("run.failed/r2@a", "r2")})
	must(t, err)
	same(t, added, []string{"run.failed/r2@a"})
	n, err := s.GetNotification(ctx, "run.failed/r1@a")
	must(t, err)
	if n.Text != "text of run.failed/r1@a" || n.Status != state.NotifyPending || n.Attempts != 0 || !n.CreatedAt.Equal(at0) {
		t.Fatalf("first enqueued message: got %+v", n)
	}
	if n.Data["run"] != "r1" {
		t.Fatalf("data: got %v", n.Data)
	}

	// Eight replicas observe the same three events at once.
	var mu sync.Mutex
	total := map[string]int{}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ns := []state.Notification{note("run.failed/x@a", "x"), note("run.failed/y@a", "y"), note(fmt.Sprintf("only/%d", i), "z")}
			added, err := s.EnqueueNotifications(ctx, ns)
			if err != nil {
				t.Errorf("enqueue %d: %v", i, err)
				return
			}
			mu.Lock()
			for _, k := range added {
				total[k]++
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, k := range []string{"run.failed/x@a", "run.failed/y@a", "only/0", "only/7"} {
		if total[k] != 1 {
			t.Errorf("%s was inserted %d times by concurrent enqueues, want 1", k, total[k])
		}
	}
	if _, err := s.GetNotification(ctx, "nope"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("unknown key: got %v, want ErrNotFound", err)
	}
}

func testClaimLease(t *testing.T, open func(*testing.T) (state.NotificationStore, *Clock)) {
	s, clock := open(t)
	ctx := context.Background()
	_, err := s.EnqueueNotifications(ctx, []state.Notification{note("k1", "r1"), note("k2", "r2")})
	must(t, err)
	got, err := s.ClaimNotifications(ctx, "A", 10, 30*time.Second)
	must(t, err)
	if len(got) != 2 || got[0].ClaimedBy != "A" {
		t.Fatalf("A's claim: got %+v, want both messages", got)
	}
	got, err = s.ClaimNotifications(ctx, "B", 10, 30*time.Second)
	must(t, err)
	if len(got) != 0 {
		t.Fatalf("B claimed %d messages A holds", len(got))
	}
	must(t, s.RecordAttempt(ctx, "k1", "A", state.Attempt{Sent: true}))

	// A dies holding k2: its claim lapses and B takes it.
	clock.Advance(31 * time.Second)
	got, err = s.ClaimNotifications(ctx, "B", 10, 30*time.Second)
	must(t, err)
	if len(got) != 1 || got[0].Key != "k2" {
		t.Fatalf("B's claim after A's lapsed: got %+v, want k2 only (k1 was sent)", got)
	}
	if err := s.RecordAttempt(ctx, "k2", "A", state.Attempt{Sent: true}); !errors.Is(err, state.ErrClaimLost) {
		t.Fatalf("A recording k2 after B took it: got %v, want ErrClaimLost", err)
	}
	must(t, s.RecordAttempt(ctx, "k2", "B", state.Attempt{Sent: true}))
	if err := s.RecordAttempt(ctx, "k2", "B", state.Attempt{Sent: true}); !errors.Is(err, state.ErrClaimLost) {
		t.Fatalf("recording a sent message again: got %v, want ErrClaimLost", err)
	}
	if err := s.RecordAttempt(ctx, "nope", "B", state.Attempt{Sent: true}); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("recording an unknown key: got %v, want ErrNotFound", err)
	}
	n, err := s.GetNotification(ctx, "k2")
	must(t, err)
	if n.Status != state.NotifySent || n.Attempts != 1 || !n.SentAt.Equal(at0.Add(31*time.Second)) || !n.DueAt.IsZero() {
		t.Fatalf("k2 once sent: got %+v", n)
	}
	clock.Advance(time.Hour)
	got, err = s.ClaimNotifications(ctx, "C", 10, 30*time.Second)
	must(t, err)
	if len(got) != 0 {
		t.Fatalf("sent messages were claimed again: %+v", got)
	}
}

func testFailing(t *testing.T, open func(*testing.T) (state.NotificationStore, *Clock)) {
	s, clock := open(t)
	ctx := context.Background()
	_, err := s.EnqueueNotifications(ctx, []state.Notification{note("k", "r")})
	must(t, err)
	for i := 1; i <= 3; i++ {
		got, err := s.ClaimNotifications(ctx, "A", 10, time.Minute)
		must(t, err)
		if len(got) != 1 {
			t.Fatalf("attempt %d: claimed %d messages, want the failing one", i, len(got))
		}
		must(t, s.RecordAttempt(ctx, "k", "A", state.Attempt{Error: fmt.Sprintf("connection refused %d", i), RetryIn: 10 * time.Second}))
		n, err := s.GetNotification(ctx, "k")
		must(t, err)
		if n.Status != state.NotifyFailing || n.Attempts != i || n.LastError != fmt.Sprintf("connection refused %d", i) || n.ClaimedBy != "" {
			t.Fatalf("after failed attempt %d: got %+v", i, n)
		}
		if !n.DueAt.Equal(clock.Now().Add(10 * time.Second)) {
			t.Fatalf("due at %s, want 10s after %s", n.DueAt, clock.Now())
		}
		got, err = s.ClaimNotifications(ctx, "A", 10, time.Minute)
		must(t, err)
		if len(got) != 0 {
			t.Fatalf("claimed during its backoff")
		}
		clock.Advance(10 * time.Second)
	}
	list, err := s.ListNotifications(ctx, state.NotificationFilter{Status: []state.NotificationStatus{state.NotifyFailing}})
	must(t, err)
	if len(list) != 1 || list[0].Key != "k" {
		t.Fatalf("failing listing: got %+v", list)
	}
	n, err := s.PruneNotifications(ctx, clock.Now().Add(time.Hour))
	must(t, err)
	if n != 0 {
		t.Fatalf("pruning deleted %d failing messages", n)
	}
}

func testClaimConcurrent(t *testing.T, open func(*testing.T) (state.NotificationStore, *Clock)) {
	s, _ := open(t)
	ctx := context.Background()
	var ns []state.Notification
	for i := range 40 {
		ns = append(ns, note(fmt.Sprintf("k%02d", i), "r"))
	}
	_, err := s.EnqueueNotifications(ctx, ns)
	must(t, err)
	var mu sync.Mutex
	seen := map[string]string{}
	var wg sync.WaitGroup
	for _, who := range []string{"A", "B", "C", "D"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				got, err := s.ClaimNotifications(ctx, who, 3, time.Minute)
				if err != nil {
					t.Errorf("%s: %v", who, err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, n := range got {
					if prev, dup := seen[n.Key]; dup {
						t.Errorf("%s claimed by %s and %s", n.Key, prev, who)
					}
					seen[n.Key] = who
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != 40 {
		t.Fatalf("claimed %d messages, want 40", len(seen))
	}
}

func testListNotifications(t *testing.T, open func(*testing.T) (state.NotificationStore, *Clock)) {
	s, clock := open(t)
	ctx := context.Background()
	for i := range 5 {
		_, err := s.EnqueueNotifications(ctx, []state.Notification{note(fmt.Sprintf("k%d", i), fmt.Sprintf("r%d", i%2))})
		must(t, err)
		clock.Advance(time.Second)
	}
	keys := func(ns []state.Notification) []string {
		var out []string
		for _, n := range ns {
			out = append(out, n.Key)
		}
		return out
	}
	all, err := s.ListNotifications(ctx, state.NotificationFilter{})
	must(t, err)
	same(t, keys(all), []string{"k4", "k3", "k2", "k1", "k0"})
	page, err := s.ListNotifications(ctx, state.NotificationFilter{Limit: 2})
	must(t, err)
	same(t, keys(page), []string{"k4", "k3"})
	last := page[len(page)-1]
	page, err = s.ListNotifications(ctx, state.NotificationFilter{Limit: 2, Before: &state.RunCursor{CreatedAt: last.CreatedAt, ID: last.Key}})
	must(t, err)
	same(t, keys(page), []string{"k2", "k1"})
	byRun, err := s.ListNotifications(ctx, state.NotificationFilter{RunID: "r1"})
	must(t, err)
	same(t, keys(byRun), []string{"k3", "k1"})

	got, err := s.ClaimNotifications(ctx, "A", 1, time.Minute)
	must(t, err)
	must(t, s.RecordAttempt(ctx, got[0].Key, "A", state.Attempt{Sent: true}))
	sent, err := s.ListNotifications(ctx, state.NotificationFilter{Status: []state.NotificationStatus{state.NotifySent}})
	must(t, err)
	same(t, keys(sent), []string{got[0].Key})
	pending, err := s.ListNotifications(ctx, state.NotificationFilter{Status: []state.NotificationStatus{state.NotifyPending}})
	must(t, err)
	if len(pending) != 4 || slices.Contains(keys(pending), got[0].Key) {
		t.Fatalf("pending: got %v", keys(pending))
	}
}

func testPruneNotifications(t *testing.T, open func(*testing.T) (state.NotificationStore, *Clock)) {
	s, clock := open(t)
	ctx := context.Background()
	_, err := s.EnqueueNotifications(ctx, []state.Notification{note("old", "r"), note("new", "r"), note("unsent", "r")})
	must(t, err)
	send := func(key string) {
		t.Helper()
		for {
			got, err := s.ClaimNotifications(ctx, "A", 1, time.Minute)
			must(t, err)
			if len(got) == 0 {
				t.Fatalf("%s was not claimed", key)
			}
			if got[0].Key == key {
				must(t, s.RecordAttempt(ctx, key, "A", state.Attempt{Sent: true}))
				return
			}
			must(t, s.RecordAttempt(ctx, got[0].Key, "A", state.Attempt{Error: "later", RetryIn: time.Hour}))
		}
	}
	send("old")
	clock.Advance(time.Hour)
	bound := clock.Now()
	send("new")
	n, err := s.PruneNotifications(ctx, bound)
	must(t, err)
	if n != 1 {
		t.Fatalf("pruned %d, want 1 (old)", n)
	}
	if _, err := s.GetNotification(ctx, "old"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("old after pruning: got %v", err)
	}
	for _, k := range []string{"new", "unsent"} {
		if _, err := s.GetNotification(ctx, k); err != nil {
			t.Fatalf("%s after pruning: %v", k, err)
		}
	}
	all, err := s.ListNotifications(ctx, state.NotificationFilter{})
	must(t, err)
	if len(all) != 2 {
		t.Fatalf("listing after pruning: %d messages, want 2", len(all))
	}
}
