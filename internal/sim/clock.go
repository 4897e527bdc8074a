package sim

import (
	"sync"
	"time"
)

// Clock is simulated time: it runs Speed times faster than real time from
// its start, and Advance jumps it forward. Services use it for every
// timestamp and every asynchronous transition.
type Clock struct {
	mu     sync.Mutex
	base   time.Time // simulated time at realAt
	realAt time.Time
	speed  float64
	real   func() time.Time
}

// NewClock starts simulated time at start (zero: now) running speed times
// faster than real time (<= 0: 1).
func NewClock(start time.Time, speed float64) *Clock {
	if speed <= 0 {
		speed = 1
	}
	now := time.Now()
	if start.IsZero() {
		start = now
	}
	return &Clock{base: start, realAt: now, speed: speed, real: time.Now}
}

// Now returns the simulated time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nowLocked()
}

func (c *Clock) nowLocked() time.Time {
	elapsed := c.real().Sub(c.realAt)
	return c.base.Add(time.Duration(float64(elapsed) * c.speed))
}

// Advance moves simulated time forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.base, c.realAt = c.nowLocked().Add(d), c.real()
}

// Speed returns how many simulated seconds pass per real second.
func (c *Clock) Speed() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.speed
}

// Real converts a simulated duration to the real time it takes.
func (c *Clock) Real(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.Speed())
}
