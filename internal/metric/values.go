package metric

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
)

// value is a float64 changed atomically.
type value struct{ bits atomic.Uint64 }

func (v *value) load() float64 { return math.Float64frombits(v.bits.Load()) }

func (v *value) store(f float64) { v.bits.Store(math.Float64bits(f)) }

func (v *value) add(d float64) {
	for {
		old := v.bits.Load()
		if v.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+d)) {
			return
		}
	}
}

// Counter is a value that only goes up.
type Counter struct{ v value }

// Inc adds 1.
func (c *Counter) Inc() { c.v.add(1) }

// Add adds d, which must not be negative.
func (c *Counter) Add(d float64) {
	if d < 0 {
		panic("metric: a counter cannot go down")
	}
	c.v.add(d)
}

// Value is the counter's value.
func (c *Counter) Value() float64 { return c.v.load() }

// Gauge is a value that goes up and down.
type Gauge struct{ v value }

func (g *Gauge) Set(f float64)  { g.v.store(f) }
func (g *Gauge) Add(d float64)  { g.v.add(d) }
func (g *Gauge) Value() float64 { return g.v.load() }

// Histogram counts observations in buckets of upper bounds.
type Histogram struct {
	bounds []float64 // ascending, +Inf excluded

	mu     sync.Mutex
	counts []uint64 // per bucket, not cumulative; the last is +Inf's
	sum    float64
	count  uint64
}

func newHistogram(bounds []float64) *Histogram {
	return &Histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

// Observe counts v in the first bucket whose bound is v or above.
func (h *Histogram) Observe(v float64) {
	i, _ := slices.BinarySearch(h.bounds, v)
	h.mu.Lock()
	h.counts[i]++
	h.sum += v
	h.count++
	h.mu.Unlock()
}

// series is the histogram's cumulative buckets, sum and count.
func (h *Histogram) series(labels []label) series {
	s := series{labels: labels, buckets: make([]bucket, len(h.counts))}
	h.mu.Lock()
	defer h.mu.Unlock()
	var cum uint64
	for i, n := range h.counts {
		cum += n
		bound := math.Inf(1)
		if i < len(h.bounds) {
			bound = h.bounds[i]
		}
		s.buckets[i] = bucket{bound, float64(cum)}
	}
	s.sum, s.count = h.sum, h.count
	return s
}

// vec holds the children of a family with labels, one per combination of
// label values, made on first use.
type vec[T any] struct {
	desc *Desc
	make func() *T

	mu       sync.RWMutex
	children map[string]*child[T]
}

type child[T any] struct {
	labels []label
	m      *T
}

func newVec[T any](d *Desc, mk func() *T) *vec[T] {
	if slices.Contains(d.Labels, "le") || slices.Contains(d.Labels, "quantile") {
		panic("metric: le and quantile are reserved label names")
	}
	return &vec[T]{desc: d, make: mk, children: map[string]*child[T]{}}
}

// with returns the child of the label values, made if new.
func (v *vec[T]) with(values []string) *T {
	// The key is the values joined by a byte no UTF-8 text holds, built
	// on the stack: a lookup of a child that exists allocates nothing.
	var buf [128]byte
	key := buf[:0]
	for i, s := range values {
		if i > 0 {
			key = append(key, 0xff)
		}
		key = append(key, s...)
	}
	v.mu.RLock()
	c := v.children[string(key)]
	v.mu.RUnlock()
	if c != nil {
		return c.m
	}
	labels := labelsOf(v.desc, values)
	v.mu.Lock()
	defer v.mu.Unlock()
	if c := v.children[string(key)]; c != nil {
		return c.m
	}
	c = &child[T]{labels: labels, m: v.make()}
	v.children[string(key)] = c
	return c.m
}

func (v *vec[T]) each(fn func(labels []label, m *T)) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	for _, c := range v.children {
		fn(c.labels, c.m)
	}
}

// CounterVec is a family of counters with labels.
type CounterVec struct{ v *vec[Counter] }

// NewCounterVec returns a family of counters named name with the given
// label names; a family without labels has one counter, With().
func NewCounterVec(name, help string, labels ...string) *CounterVec {
	return &CounterVec{newVec(&Desc{Name: name, Help: help, Type: CounterType, Labels: labels}, func() *Counter { return &Counter{} })}
}

// With returns the counter of the label values, in the order of the
// family's label names.
func (c *CounterVec) With(values ...string) *Counter { return c.v.with(values) }

func (c *CounterVec) Collect(s *Scrape) {
	c.v.each(func(ls []label, m *Counter) { s.add(c.v.desc, series{labels: ls, value: m.Value()}) })
}

// GaugeVec is a family of gauges with labels.
type GaugeVec struct{ v *vec[Gauge] }

// NewGaugeVec returns a family of gauges named name with the given label
// names.
func NewGaugeVec(name, help string, labels ...string) *GaugeVec {
	return &GaugeVec{newVec(&Desc{Name: name, Help: help, Type: GaugeType, Labels: labels}, func() *Gauge { return &Gauge{} })}
}

// With returns the gauge of the label values.
func (g *GaugeVec) With(values ...string) *Gauge { return g.v.with(values) }

func (g *GaugeVec) Collect(s *Scrape) {
	g.v.each(func(ls []label, m *Gauge) { s.add(g.v.desc, series{labels: ls, value: m.Value()}) })
}

// HistogramVec is a family of histograms with labels, all with the same
// bucket bounds.
type HistogramVec struct{ v *vec[Histogram] }

// NewHistogramVec returns a family of histograms named name with the
// given ascending bucket bounds (+Inf is added) and label names.
func NewHistogramVec(name, help string, bounds []float64, labels ...string) *HistogramVec {
	if !slices.IsSorted(bounds) {
		panic("metric: " + name + ": bucket bounds are not ascending")
	}
	bounds = slices.Clone(bounds)
	if n := len(bounds); n > 0 && math.IsInf(bounds[n-1], 1) {
		bounds = bounds[:n-1]
	}
	return &HistogramVec{newVec(&Desc{Name: name, Help: help, Type: HistogramType, Labels: labels}, func() *Histogram { return newHistogram(bounds) })}
}

// With returns the histogram of the label values.
func (h *HistogramVec) With(values ...string) *Histogram { return h.v.with(values) }

func (h *HistogramVec) Collect(s *Scrape) {
	h.v.each(func(ls []label, m *Histogram) { s.add(h.v.desc, m.series(ls)) })
}

// GaugeFunc is a gauge without labels read from fn at each scrape.
type GaugeFunc struct {
	desc *Desc
	fn   func() float64
}

// NewGaugeFunc returns a gauge named name whose value is fn's at each
// scrape.
func NewGaugeFunc(name, help string, fn func() float64) *GaugeFunc {
	return &GaugeFunc{desc: NewDesc(name, help), fn: fn}
}

func (g *GaugeFunc) Collect(s *Scrape) { s.Value(g.desc, g.fn()) }
