package server

import (
	"strings"
	"sync"

	"github.com/runbook/runbook/internal/state"
)

// broker fans the engine's events out to the log streams that follow a
// run. A slow reader never blocks the engine: its buffer is bounded and an
// overflow ends its stream with a "lagged" notice, after which the client
// reconnects with Last-Event-ID and reads the rest from the store.
type broker struct {
	mu     sync.Mutex
	subs   map[string]map[*subscription]struct{}
	closed bool
}

type subscription struct {
	ch     chan state.Event
	lagged bool // set (under broker.mu) when an event was dropped
	done   chan struct{}
	once   sync.Once
}

const subscriptionBuffer = 256

func newBroker() *broker { return &broker{subs: map[string]map[*subscription]struct{}{}} }

func (b *broker) subscribe(runID string) *subscription {
	sub := &subscription{ch: make(chan state.Event, subscriptionBuffer), done: make(chan struct{})}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		sub.once.Do(func() { close(sub.done) })
		return sub
	}
	m := b.subs[runID]
	if m == nil {
		m = map[*subscription]struct{}{}
		b.subs[runID] = m
	}
	m[sub] = struct{}{}
	return sub
}

func (b *broker) unsubscribe(runID string, sub *subscription) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if m := b.subs[runID]; m != nil {
		delete(m, sub)
		if len(m) == 0 {
			delete(b.subs, runID)
		}
	}
}

// allRuns is the subscription key of the streams that follow every run's
// changes (GET /api/v1/changes): they receive each run's run.* events.
const allRuns = "*"

func (b *broker) publish(runID string, ev state.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.deliver(b.subs[runID], ev)
	if strings.HasPrefix(ev.Type, "run.") {
		b.deliver(b.subs[allRuns], ev)
	}
}

// deliver hands ev to each subscription of subs (b.mu held).
func (b *broker) deliver(subs map[*subscription]struct{}, ev state.Event) {
	for sub := range subs {
		if sub.lagged {
			continue
		}
		select {
		case sub.ch <- ev:
		default:
			sub.lagged = true
			sub.once.Do(func() { close(sub.done) })
		}
	}
}

func (b *broker) isLagged(sub *subscription) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return sub.lagged
}

// close ends every stream (server shutdown).
func (b *broker) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for _, m := range b.subs {
		for sub := range m {
			sub.once.Do(func() { close(sub.done) })
		}
	}
	b.subs = map[string]map[*subscription]struct{}{}
}
