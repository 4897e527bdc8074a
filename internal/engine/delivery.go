package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/runbook/runbook/internal/state"
)

// resolveTrigger sets what the run sees as `trigger`: a run started by a
// stored webhook delivery (state.Run.Delivery) gets the payload and hook
// from it; any other run (and a run of an earlier build, which carries
// them inline) sees its record's trigger as it is.
func (rs *runState) resolveTrigger(ctx context.Context) error {
	ref := rs.run.Delivery
	if ref == nil {
		return nil
	}
	var payload any
	err := rs.stored(func() (err error) {
		payload, err = rs.e.deliveries.payload(ctx, rs.e.o.Store, ref.ID)
		return err
	})
	if err != nil {
		return fmt.Errorf("read the webhook delivery of run %s: %w", rs.run.ID, err)
	}
	t, err := ref.Trigger(rs.run.Trigger, payload)
	if err != nil {
		return fmt.Errorf("run %s: %w", rs.run.ID, err)
	}
	rs.mu.Lock()
	rs.trigger = t
	rs.mu.Unlock()
	return nil
}

// Bounds of deliveryCache: the bodies of the deliveries it keeps decoded
// (the one used last is kept whatever its size).
const (
	deliveryCacheBytes   = 8 << 20
	deliveryCacheEntries = 16
)

// deliveryCache keeps the decoded payloads of the webhook deliveries used
// last, so that the runs of one delivery (up to 1,000, started together)
// read and decode its body once and share the result, which they only
// read. Concurrent requests for one delivery wait for the first. Errors
// are not kept. The zero value is ready to use.
type deliveryCache struct {
	mu      sync.Mutex
	entries map[string]*deliveryEntry
	order   []string // least recently used first
	bytes   int      // sum of the kept entries' body sizes
}

type deliveryEntry struct {
	ready   chan struct{} // closed once payload or err is set
	payload any
	err     error
	size    int
	loaded  bool // payload is set and counted in bytes; guarded by deliveryCache.mu
}

// payload returns the decoded body of delivery id.
func (c *deliveryCache) payload(ctx context.Context, store state.Store, id string) (any, error) {
	c.mu.Lock()
	if c.entries == nil {
		c.entries = map[string]*deliveryEntry{}
	}
	e, ok := c.entries[id]
	if ok {
		c.touch(id)
		c.mu.Unlock()
		select {
		case <-e.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if e.err == nil {
			return e.payload, nil
		}
		return c.payload(ctx, store, id) // the load failed and was dropped: try again
	}
	e = &deliveryEntry{ready: make(chan struct{})}
	c.entries[id] = e
	c.order = append(c.order, id)
	c.mu.Unlock()

	body, err := store.GetDelivery(ctx, id)
	if err == nil {
		e.payload, err = state.DecodePayload(body)
	}
	e.err, e.size = err, len(body)
	c.mu.Lock()
	if err != nil {
		c.drop(id)
	} else {
		e.loaded = true
		c.bytes += e.size
		c.evict()
	}
	c.mu.Unlock()
	close(e.ready)
	return e.payload, err
}

// touch marks id used last. c.mu is held.
func (c *deliveryCache) touch(id string) {
	if i := slices.Index(c.order, id); i >= 0 {
		c.order = append(slices.Delete(c.order, i, i+1), id)
	}
}

// drop forgets id. c.mu is held.
func (c *deliveryCache) drop(id string) {
	if i := slices.Index(c.order, id); i >= 0 {
		c.order = slices.Delete(c.order, i, i+1)
	}
	delete(c.entries, id)
}

// evict forgets the least recently used loaded entries beyond the bounds,
// keeping the last one. c.mu is held.
func (c *deliveryCache) evict() {
	for i := 0; i < len(c.order)-1 && (c.bytes > deliveryCacheBytes || len(c.order) > deliveryCacheEntries); {
		id := c.order[i]
		e := c.entries[id]
		if !e.loaded {
			i++ // still loading: its loader evicts once it is counted
			continue
		}
		c.bytes -= e.size
		c.order = slices.Delete(c.order, i, i+1)
		delete(c.entries, id)
	}
}

// RedactValue returns v with every known secret masked, as run records
// are: for a record the engine does not write itself (a webhook
// delivery's body, stored once for its runs).
func (e *Engine) RedactValue(v any) any { return e.o.Redactor.Value(v) }
