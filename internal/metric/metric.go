// Package metric is what runbook serve's /metrics is made of: counters,
// gauges and histograms, with or without labels; families read at each
// scrape (Collector); the Go runtime's and the process's figures
// (RuntimeCollector, ProcessCollector); and a Registry that writes them
// all in Prometheus's text exposition format (version 0.0.4), the format
// every Prometheus server and agent scrapes.
//
// It is runbook's own so that no process pays for what only a scrape
// uses: the Prometheus client library brought about 50 packages
// (Protocol Buffers among them) whose initialisation every runbook
// command ran, `runbook version` included (docs/performance.md,
// "Start-up").
//
// The text is what a Prometheus client writes: families sorted by name,
// each with its HELP and TYPE, its series sorted by their labels, labels
// by name (a histogram's le last), values in Go's shortest form ('g'),
// +Inf, -Inf and NaN as Prometheus spells them. A family with no series
// is left out.
package metric

import (
	"bufio"
	"cmp"
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Type is a family's TYPE.
type Type string

const (
	CounterType   Type = "counter"
	GaugeType     Type = "gauge"
	HistogramType Type = "histogram"
	SummaryType   Type = "summary"
)

// Desc names a family: its name, help, type and label names.
type Desc struct {
	Name, Help string
	Type       Type
	Labels     []string
}

// NewDesc returns the Desc of a family of gauges (the kind a Collector
// reads at a scrape).
func NewDesc(name, help string, labels ...string) *Desc {
	return &Desc{Name: name, Help: help, Type: GaugeType, Labels: labels}
}

// A Collector adds its series to a scrape.
type Collector interface {
	Collect(s *Scrape)
}

// Scrape gathers the series of one read of a Registry.
type Scrape struct {
	families map[string]*family
}

// family is a Desc and its series as scraped.
type family struct {
	desc   *Desc
	series []series
}

// series is one labelled value of a family: a counter's or a gauge's
// value, a histogram's buckets or a summary's quantiles.
type series struct {
	labels    []label // sorted by name
	value     float64
	buckets   []bucket // cumulative; histograms
	quantiles []bucket // summaries: bound is the quantile
	count     uint64
	sum       float64
}

type label struct{ name, value string }

type bucket struct {
	bound float64
	count float64
}

// Value adds a counter's or a gauge's value (its Desc's Type says which)
// with the label values of d.Labels, in order.
func (s *Scrape) Value(d *Desc, v float64, labelValues ...string) {
	s.add(d, series{labels: labelsOf(d, labelValues), value: v})
}

// gauge and counter add the value of a family without labels: the
// runtime's and the process's figures.
func (s *Scrape) gauge(name, help string, v float64) {
	s.Value(&Desc{Name: name, Help: help, Type: GaugeType}, v)
}

func (s *Scrape) counter(name, help string, v float64) {
	s.Value(&Desc{Name: name, Help: help, Type: CounterType}, v)
}

// Summary adds a summary's series: its quantiles (quantile to value),
// its sum and its count.
func (s *Scrape) Summary(d *Desc, quantiles map[float64]float64, sum float64, count uint64, labelValues ...string) {
	qs := make([]bucket, 0, len(quantiles))
	for q, v := range quantiles {
		qs = append(qs, bucket{q, v})
	}
	slices.SortFunc(qs, func(a, b bucket) int { return cmp.Compare(a.bound, b.bound) })
	s.add(d, series{labels: labelsOf(d, labelValues), quantiles: qs, sum: sum, count: count})
}

func (s *Scrape) add(d *Desc, sr series) {
	f := s.families[d.Name]
	if f == nil {
		f = &family{desc: d}
		s.families[d.Name] = f
	} else if f.desc != d && (f.desc.Type != d.Type || !slices.Equal(f.desc.Labels, d.Labels)) {
		panic(fmt.Sprintf("metric: family %s collected with two descriptions", d.Name))
	}
	f.series = append(f.series, sr)
}

// labelsOf pairs d's label names with values, sorted by name.
func labelsOf(d *Desc, values []string) []label {
	if len(values) != len(d.Labels) {
		panic(fmt.Sprintf("metric: %s has labels %v, given %d values", d.Name, d.Labels, len(values)))
	}
	if len(values) == 0 {
		return nil
	}
	ls := make([]label, len(values))
	for i, v := range values {
		ls[i] = label{d.Labels[i], v}
	}
	slices.SortFunc(ls, func(a, b label) int { return strings.Compare(a.name, b.name) })
	return ls
}

// Registry holds the collectors of one /metrics.
type Registry struct {
	mu         sync.Mutex
	collectors []Collector
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{} }

// Register adds collectors. The names they collect are checked at each
// scrape: two collectors giving one family two descriptions panic there.
func (r *Registry) Register(cs ...Collector) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.collectors = append(r.collectors, cs...)
}

// WriteTo writes every family in the text exposition format.
func (r *Registry) WriteTo(w io.Writer) (int64, error) {
	r.mu.Lock()
	cs := slices.Clone(r.collectors)
	r.mu.Unlock()
	s := &Scrape{families: map[string]*family{}}
	for _, c := range cs {
		c.Collect(s)
	}
	names := make([]string, 0, len(s.families))
	for name, f := range s.families {
		if len(f.series) > 0 {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	cw := &countingWriter{w: bufio.NewWriter(w)}
	for _, name := range names {
		writeFamily(cw, s.families[name])
	}
	if err := cw.w.Flush(); err != nil && cw.err == nil {
		cw.err = err
	}
	return cw.n, cw.err
}

// ContentType is the type of the text exposition format.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Handler answers GET (and HEAD) with every family, gzipped when the
// scraper accepts it (Prometheus does).
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", ContentType)
		w.Header().Add("Vary", "Accept-Encoding")
		if req.Method == http.MethodHead {
			return
		}
		out := io.Writer(w)
		if acceptsGzip(req.Header.Get("Accept-Encoding")) {
			w.Header().Set("Content-Encoding", "gzip")
			gz := gzips.Get().(*gzip.Writer)
			gz.Reset(w)
			defer func() {
				gz.Close()
				gz.Reset(io.Discard) // let w go
				gzips.Put(gz)
			}()
			out = gz
		}
		r.WriteTo(out) // an error here is the scraper gone: nothing to tell it
	})
}

// gzips keeps gzip writers between scrapes: each holds hundreds of
// kilobytes of compressor state.
var gzips = sync.Pool{New: func() any {
	gz, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
	return gz
}}

// acceptsGzip reports whether an Accept-Encoding header lists gzip with
// a weight above zero.
func acceptsGzip(h string) bool {
	for part := range strings.SplitSeq(h, ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(enc), "gzip") {
			continue
		}
		q, ok := strings.CutPrefix(strings.TrimSpace(params), "q=")
		if !ok {
			return true
		}
		w, err := strconv.ParseFloat(q, 64)
		return err == nil && w > 0
	}
	return false
}

type countingWriter struct {
	w   *bufio.Writer
	n   int64
	err error
}

func (c *countingWriter) WriteString(s string) {
	if c.err != nil {
		return
	}
	n, err := c.w.WriteString(s)
	c.n += int64(n)
	c.err = err
}

func writeFamily(w *countingWriter, f *family) {
	d := f.desc
	slices.SortStableFunc(f.series, func(a, b series) int { return compareLabels(a.labels, b.labels) })
	w.WriteString("# HELP " + d.Name + " " + escapeHelp(d.Help) + "\n")
	w.WriteString("# TYPE " + d.Name + " " + string(d.Type) + "\n")
	for _, s := range f.series {
		switch {
		case d.Type == HistogramType:
			for _, b := range s.buckets {
				writeSample(w, d.Name+"_bucket", s.labels, &label{"le", formatFloat(b.bound)}, b.count)
			}
			writeSample(w, d.Name+"_sum", s.labels, nil, s.sum)
			writeSample(w, d.Name+"_count", s.labels, nil, float64(s.count))
		case d.Type == SummaryType:
			for _, q := range s.quantiles {
				writeSample(w, d.Name, s.labels, &label{"quantile", formatFloat(q.bound)}, q.count)
			}
			writeSample(w, d.Name+"_sum", s.labels, nil, s.sum)
			writeSample(w, d.Name+"_count", s.labels, nil, float64(s.count))
		default:
			writeSample(w, d.Name, s.labels, nil, s.value)
		}
	}
}

func writeSample(w *countingWriter, name string, labels []label, extra *label, v float64) {
	w.WriteString(name)
	if len(labels) > 0 || extra != nil {
		w.WriteString("{")
		for i, l := range labels {
			if i > 0 {
				w.WriteString(",")
			}
			w.WriteString(l.name + `="` + escapeLabel(l.value) + `"`)
		}
		if extra != nil {
			if len(labels) > 0 {
				w.WriteString(",")
			}
			w.WriteString(extra.name + `="` + extra.value + `"`)
		}
		w.WriteString("}")
	}
	w.WriteString(" " + formatFloat(v) + "\n")
}

// compareLabels orders series by their label values, label by label.
func compareLabels(a, b []label) int {
	for i := range min(len(a), len(b)) {
		if c := strings.Compare(a[i].name, b[i].name); c != 0 {
			return c
		}
		if c := strings.Compare(a[i].value, b[i].value); c != 0 {
			return c
		}
	}
	return len(a) - len(b)
}

// formatFloat spells v as the text format does.
func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

func escapeHelp(s string) string  { return helpEscaper.Replace(s) }
func escapeLabel(s string) string { return labelEscaper.Replace(s) }
