package metric

import (
	"bytes"
	"compress/gzip"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pair is a Collector of two families read at the scrape, as the server's
// per-playbook view is.
type pair struct{ up, down *Desc }

func (p pair) Collect(s *Scrape) {
	s.Value(p.down, 0, "b")
	s.Value(p.up, 2, `say "hi"\now`+"\n")
	s.Value(p.up, 1, "a")
}

func written(t *testing.T, r *Registry) string {
	t.Helper()
	var b bytes.Buffer
	n, err := r.WriteTo(&b)
	require.NoError(t, err)
	assert.Equal(t, int64(b.Len()), n)
	return b.String()
}

// TestTheTextIsPrometheusText: families by name, series by labels, labels
// by name with le and quantile last, escapes, special values, and no
// family without a series.
func TestTheTextIsPrometheusText(t *testing.T) {
	r := NewRegistry()
	hits := NewCounterVec("hits_total", "Hits by route\\method,\nsplit.", "route", "method")
	hits.With("sms", "POST").Add(2.5)
	hits.With("log", "POST").Inc()
	NewCounterVec("never_total", "No series: not written.", "x") // made, never used
	lat := NewHistogramVec("latency_seconds", "Latency.", []float64{0.01, 0.1, 1}, "route")
	for _, v := range []float64{0.0078125, 0.0625, 1, 7} { // 1 is counted under le="1"
		lat.With("sms").Observe(v)
	}
	g := NewGaugeVec("level", "A gauge.", "zone")
	g.With("kr").Set(math.Inf(1))
	g.With("jp").Set(math.NaN())
	g.With("us").Set(-3)
	r.Register(hits, NewCounterVec("never_total", "No series: not written.", "x"), lat, g,
		NewGaugeFunc("answer", "Read at the scrape.", func() float64 { return 42 }),
		pair{up: NewDesc("collected", "From a collector.", "who"), down: NewDesc("collected_too", "Also.", "who")},
		summaryOf{&Desc{Name: "pause_seconds", Help: "A summary.", Type: SummaryType}})

	text := written(t, r)
	assert.Equal(t, `# HELP answer Read at the scrape.
# TYPE answer gauge
answer 42
# HELP collected From a collector.
# TYPE collected gauge
collected{who="a"} 1
collected{who="say \"hi\"\\now\n"} 2
# HELP collected_too Also.
# TYPE collected_too gauge
collected_too{who="b"} 0
# HELP hits_total Hits by route\\method,\nsplit.
# TYPE hits_total counter
hits_total{method="POST",route="log"} 1
hits_total{method="POST",route="sms"} 2.5
# HELP latency_seconds Latency.
# TYPE latency_seconds histogram
latency_seconds_bucket{route="sms",le="0.01"} 1
latency_seconds_bucket{route="sms",le="0.1"} 2
latency_seconds_bucket{route="sms",le="1"} 3
latency_seconds_bucket{route="sms",le="+Inf"} 4
latency_seconds_sum{route="sms"} 8.0703125
latency_seconds_count{route="sms"} 4
# HELP level A gauge.
# TYPE level gauge
level{zone="jp"} NaN
level{zone="kr"} +Inf
level{zone="us"} -3
# HELP pause_seconds A summary.
# TYPE pause_seconds summary
pause_seconds{quantile="0"} 1e-05
pause_seconds{quantile="0.5"} 0.002
pause_seconds{quantile="1"} 1.5e+08
pause_seconds_sum 3
pause_seconds_count 7
`, text)
	promtoolAccepts(t, text)
}

type summaryOf struct{ d *Desc }

func (s summaryOf) Collect(sc *Scrape) {
	sc.Summary(s.d, map[float64]float64{1: 1.5e8, 0: 1e-5, 0.5: 0.002}, 3, 7)
}

// promtoolAccepts has Prometheus's own checker (Debian's prometheus
// package; .ci/run installs it) read text as a scrape.
func promtoolAccepts(t *testing.T, text string) {
	t.Helper()
	if _, err := exec.LookPath("promtool"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool is missing (Debian's prometheus package; CI=true: this test may not skip)")
		}
		t.Skip("promtool is missing (Debian's prometheus package)")
	}
	cmd := exec.Command("promtool", "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "promtool check metrics:\n%s\nof:\n%s", out, text)
}

// TestAHistogramCountsEachObservationOnce under concurrent observers, and
// a counter each increment.
func TestAHistogramCountsEachObservationOnce(t *testing.T) {
	h := NewHistogramVec("h", "H.", []float64{1, 2}).With()
	c := NewCounterVec("c_total", "C.").With()
	var wg sync.WaitGroup
	atMostOne := 0
	for w := range 8 {
		for i := range 1000 {
			if (w+i)%3 <= 1 {
				atMostOne++
			}
		}
		wg.Go(func() {
			for i := range 1000 {
				h.Observe(float64((w + i) % 3)) // 0, 1, 2 in turn
				c.Inc()
			}
		})
	}
	wg.Wait()
	s := h.series(nil)
	assert.Equal(t, []bucket{{1, float64(atMostOne)}, {2, 8000}, {math.Inf(1), 8000}}, s.buckets)
	assert.Equal(t, uint64(8000), s.count)
	assert.Equal(t, 8000.0, c.Value())
}

// TestCountingASeenSeriesAllocatesNothing: the server counts every step's
// end and every run's end.
func TestCountingASeenSeriesAllocatesNothing(t *testing.T) {
	c := NewCounterVec("c_total", "C.", "playbook", "trigger", "status")
	h := NewHistogramVec("h", "H.", []float64{1, 2}, "playbook", "trigger", "outcome")
	c.With("nightly", "schedule", "succeeded").Inc()
	h.With("nightly", "schedule", "succeeded").Observe(1)
	pb := strings.Repeat("p", 40)
	c.With(pb, "webhook", "failed").Inc()
	allocs := testing.AllocsPerRun(100, func() {
		c.With("nightly", "schedule", "succeeded").Inc()
		h.With("nightly", "schedule", "succeeded").Observe(1)
		c.With(pb, "webhook", "failed").Inc()
	})
	assert.Zero(t, allocs)
	assert.Equal(t, 102.0, c.With(pb, "webhook", "failed").Value(), "once before, once to warm up, 100 times counted")
}

// TestTwoDescriptionsOfOneFamilyAreRefused: a family written twice with
// other label names would be text no scraper takes.
func TestTwoDescriptionsOfOneFamilyAreRefused(t *testing.T) {
	a := NewGaugeVec("x", "X.", "a")
	a.With("1").Set(1)
	r := NewRegistry()
	r.Register(a, pair{up: NewDesc("x", "X.", "b"), down: NewDesc("y", "Y.", "b")})
	assert.PanicsWithValue(t, "metric: family x collected with two descriptions", func() { r.WriteTo(io.Discard) })
	assert.Panics(t, func() { NewGaugeVec("g", "G.", "a").With("1", "2") }, "two values for one label")
	assert.Panics(t, func() { NewHistogramVec("h", "H.", []float64{2, 1}) }, "bounds not ascending")
	assert.Panics(t, func() { NewCounterVec("c_total", "C.").With().Add(-1) }, "a counter going down")
}

// TestTheHandlerGzipsForScrapersThatAskIt answers the format's type,
// gzipped or not as asked, nothing to HEAD, and refuses other methods.
func TestTheHandlerGzipsForScrapersThatAskIt(t *testing.T) {
	r := NewRegistry()
	r.Register(NewGaugeFunc("up_here", "1.", func() float64 { return 1 }))
	srv := httptest.NewServer(r.Handler())
	defer srv.Close()
	tr := &http.Transport{DisableCompression: true} // see the bytes as sent
	defer tr.CloseIdleConnections()
	get := func(method, enc string) (*http.Response, []byte) {
		req, err := http.NewRequest(method, srv.URL, nil)
		require.NoError(t, err)
		if enc != "" {
			req.Header.Set("Accept-Encoding", enc)
		}
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, b
	}
	want := "# HELP up_here 1.\n# TYPE up_here gauge\nup_here 1\n"

	resp, body := get("GET", "")
	assert.Equal(t, ContentType, resp.Header.Get("Content-Type"))
	assert.Empty(t, resp.Header.Get("Content-Encoding"))
	assert.Equal(t, want, string(body))

	for _, enc := range []string{"gzip", "deflate, gzip;q=0.5", "GZIP"} {
		resp, body = get("GET", enc)
		require.Equal(t, "gzip", resp.Header.Get("Content-Encoding"), enc)
		zr, err := gzip.NewReader(bytes.NewReader(body))
		require.NoError(t, err)
		plain, err := io.ReadAll(zr)
		require.NoError(t, err)
		assert.Equal(t, want, string(plain), enc)
	}
	resp, _ = get("GET", "gzip;q=0, identity")
	assert.Empty(t, resp.Header.Get("Content-Encoding"), "gzip refused with q=0")

	resp, body = get("HEAD", "")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Empty(t, body)
	resp, _ = get("POST", "")
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	assert.Equal(t, "GET, HEAD", resp.Header.Get("Allow"))
}

// sample reads one value of a family from text (the first series).
func sample(t *testing.T, text, name string) float64 {
	t.Helper()
	for line := range strings.SplitSeq(text, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || !(strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, "{")) {
			continue
		}
		v, err := strconv.ParseFloat(rest[strings.LastIndexByte(rest, ' ')+1:], 64)
		require.NoError(t, err, line)
		return v
	}
	t.Fatalf("no %s in:\n%s", name, text)
	return 0
}

// TestTheRuntimeAndProcessFamiliesSayWhatTheProcessIs: the values are
// this test process's own, read the way the runtime and the kernel give
// them.
func TestTheRuntimeAndProcessFamiliesSayWhatTheProcessIs(t *testing.T) {
	r := NewRegistry()
	r.Register(RuntimeCollector(), ProcessCollector())
	runtime.GC() // a pause to count
	text := written(t, r)
	promtoolAccepts(t, text)

	assert.InDelta(t, runtime.NumGoroutine(), sample(t, text, "go_goroutines"), 5)
	assert.Equal(t, float64(runtime.GOMAXPROCS(0)), sample(t, text, "go_sched_gomaxprocs_threads"))
	assert.Contains(t, text, `go_info{version="`+runtime.Version()+`"} 1`)
	assert.GreaterOrEqual(t, sample(t, text, "go_gc_duration_seconds_count"), 1.0)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	assert.InEpsilon(t, float64(ms.HeapSys), sample(t, text, "go_memstats_heap_sys_bytes"), 0.5)
	assert.Greater(t, sample(t, text, "go_memstats_alloc_bytes_total"), sample(t, text, "go_memstats_alloc_bytes"))
	assert.Greater(t, sample(t, text, "go_memstats_last_gc_time_seconds"), float64(time.Now().Add(-time.Minute).Unix()))
	if runtime.GOOS != "linux" {
		return
	}
	rss := sample(t, text, "process_resident_memory_bytes")
	assert.Greater(t, rss, float64(ms.HeapInuse)/2, "resident memory holds the heap in use")
	assert.Less(t, rss, sample(t, text, "process_virtual_memory_bytes"))
	start := sample(t, text, "process_start_time_seconds")
	assert.Less(t, start, float64(time.Now().Unix())+1)
	assert.Greater(t, start, float64(time.Now().Add(-time.Hour).Unix()), "the test binary started within the hour")
	// /proc counts processor time in ticks (10 ms here): a test binary
	// that has used less reads 0, as a fast machine's did.
	for spin := time.Now().Add(2 * time.Second); processCPU(t) < 30*time.Millisecond && time.Now().Before(spin); {
	}
	assert.Greater(t, sample(t, written(t, r), "process_cpu_seconds_total"), 0.0)

	fds := sample(t, text, "process_open_fds")
	f, err := os.Open(os.DevNull)
	require.NoError(t, err)
	defer f.Close()
	assert.Equal(t, fds+1, sample(t, written(t, r), "process_open_fds"), "one file more")
	assert.GreaterOrEqual(t, sample(t, text, "process_max_fds"), fds)
}

// processCPU is the processor time the test binary has used.
func processCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
