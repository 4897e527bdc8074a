package postgres

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// inTest reports whether the calling goroutine runs the test function
// named: whether a send ran on its caller's goroutine.
func inTest(name string) bool {
	buf := make([]byte, 64<<10)
	return strings.Contains(string(buf[:runtime.Stack(buf, false)]), "."+name+"(")
}

// A caller that finds no worker sends its request itself, on its own
// goroutine, and gets its outcome.
func TestACallerWithNoWorkerSendsItsOwnGroup(t *testing.T) {
	var onCaller []bool
	q := &groupQueue[*int]{workers: 1, max: 10, send: func(_ context.Context, group []*int) bool {
		onCaller = append(onCaller, inTest("TestACallerWithNoWorkerSendsItsOwnGroup"))
		for _, r := range group {
			*r *= 10
		}
		return true
	}}
	for i := 1; i <= 3; i++ {
		r := i
		if err := q.do(context.Background(), &r); err != nil || r != i*10 {
			t.Fatalf("do: %v, outcome %d", err, r)
		}
	}
	if len(onCaller) != 3 || !onCaller[0] || !onCaller[1] || !onCaller[2] {
		t.Fatalf("sent on the caller's goroutine: %v", onCaller)
	}
	if groups, members := q.Groups(); groups != 3 || members != 3 {
		t.Fatalf("groups %d of %d requests", groups, members)
	}
	if q.running != 0 {
		t.Fatalf("%d workers counted after the last caller returned", q.running)
	}
}

// What queues while a caller sends its own group goes in the next group,
// which a worker sends: the caller returns once its own is answered, and
// does not send the others'.
func TestWhatQueuesWhileACallerSendsGoesToAWorker(t *testing.T) {
	first, second := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var groups [][]int
	q := &groupQueue[int]{workers: 1, max: 10, send: func(_ context.Context, group []int) bool {
		mu.Lock()
		groups = append(groups, group)
		n := len(groups)
		mu.Unlock()
		if n == 1 {
			<-first
		} else {
			<-second
		}
		return true
	}}
	led := make(chan error, 1)
	go func() { led <- q.do(context.Background(), 0) }()
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(groups) == 1 }, 10*time.Second, time.Millisecond)

	var others sync.WaitGroup
	for i := 1; i <= 3; i++ {
		others.Go(func() {
			if err := q.do(context.Background(), i); err != nil {
				t.Error(err)
			}
		})
	}
	require.Eventually(t, func() bool { return q.waiting() == 3 }, 10*time.Second, time.Millisecond)
	close(first)
	select {
	case err := <-led:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the caller waits for the others' group")
	}
	close(second)
	others.Wait()
	if len(groups) != 2 || len(groups[0]) != 1 || len(groups[1]) != 3 {
		t.Fatalf("groups %v, want [0] then the three others together", groups)
	}
	require.Eventually(t, func() bool { q.mu.Lock(); defer q.mu.Unlock(); return q.running == 0 }, 10*time.Second, time.Millisecond)
}

// A request whose ctx has ended is not sent, by a caller that would have
// led as by a worker.
func TestARequestWhoseContextEndedIsNotSent(t *testing.T) {
	sent := 0
	q := &groupQueue[int]{workers: 1, max: 10, send: func(context.Context, []int) bool { sent++; return true }}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := q.do(ctx, 1); err != context.Canceled {
		t.Fatalf("do: %v, want context.Canceled", err)
	}
	if sent != 0 || q.running != 0 || q.waiting() != 0 {
		t.Fatalf("sent %d groups, %d workers, %d waiting", sent, q.running, q.waiting())
	}
}
