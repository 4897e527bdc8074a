package metric

import (
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"time"
)

// RuntimeCollector gives the Go runtime's families under the names
// dashboards for Go services read: go_goroutines, go_threads, go_info,
// go_gc_duration_seconds, go_memstats_*, go_gc_gogc_percent,
// go_gc_gomemlimit_bytes and go_sched_gomaxprocs_threads. The memory
// figures are read from runtime/metrics, which does not stop the world.
func RuntimeCollector() Collector { return runtimeCollector{} }

type runtimeCollector struct{}

// goSamples are the runtime/metrics samples a scrape reads, by index.
var goSamples = []string{
	"/memory/classes/heap/objects:bytes",          // 0
	"/gc/heap/allocs:bytes",                       // 1
	"/memory/classes/profiling/buckets:bytes",     // 2
	"/gc/heap/frees:objects",                      // 3
	"/gc/heap/tiny/allocs:objects",                // 4
	"/memory/classes/metadata/other:bytes",        // 5
	"/memory/classes/heap/released:bytes",         // 6
	"/memory/classes/heap/free:bytes",             // 7
	"/memory/classes/heap/unused:bytes",           // 8
	"/gc/heap/objects:objects",                    // 9
	"/gc/heap/allocs:objects",                     // 10
	"/memory/classes/metadata/mcache/inuse:bytes", // 11
	"/memory/classes/metadata/mcache/free:bytes",  // 12
	"/memory/classes/metadata/mspan/inuse:bytes",  // 13
	"/memory/classes/metadata/mspan/free:bytes",   // 14
	"/gc/heap/goal:bytes",                         // 15
	"/memory/classes/other:bytes",                 // 16
	"/memory/classes/heap/stacks:bytes",           // 17
	"/memory/classes/os-stacks:bytes",             // 18
	"/memory/classes/total:bytes",                 // 19
	"/gc/gogc:percent",                            // 20
	"/gc/gomemlimit:bytes",                        // 21
	"/sched/gomaxprocs:threads",                   // 22
}

func (runtimeCollector) Collect(s *Scrape) {
	samples := make([]rtmetrics.Sample, len(goSamples))
	for i, name := range goSamples {
		samples[i].Name = name
	}
	rtmetrics.Read(samples)
	v := make([]float64, len(samples))
	for i, sm := range samples {
		if sm.Value.Kind() == rtmetrics.KindUint64 {
			v[i] = float64(sm.Value.Uint64())
		}
	}

	s.gauge("go_goroutines", "Goroutines that exist now.", float64(runtime.NumGoroutine()))
	threads, _ := runtime.ThreadCreateProfile(nil)
	s.gauge("go_threads", "Operating system threads the runtime created.", float64(threads))
	s.Value(NewDesc("go_info", "The Go version the program was built with.", "version"), 1, runtime.Version())

	gc := debug.GCStats{PauseQuantiles: make([]time.Duration, 5)}
	debug.ReadGCStats(&gc)
	qs := map[float64]float64{}
	for i, q := range []float64{0, 0.25, 0.5, 0.75, 1} {
		qs[q] = gc.PauseQuantiles[i].Seconds()
	}
	s.Summary(&Desc{Name: "go_gc_duration_seconds", Help: "Stop-the-world pauses of the garbage collector's cycles.", Type: SummaryType},
		qs, gc.PauseTotal.Seconds(), uint64(gc.NumGC))
	last := 0.0
	if !gc.LastGC.IsZero() {
		last = float64(gc.LastGC.UnixNano()) / 1e9
	}
	s.gauge("go_memstats_last_gc_time_seconds", "When the last garbage collection ended (Unix seconds; 0: none yet).", last)

	objects, released, free, unused := v[0], v[6], v[7], v[8]
	s.gauge("go_memstats_alloc_bytes", "Heap bytes allocated and in use (/memory/classes/heap/objects:bytes).", objects)
	s.gauge("go_memstats_heap_alloc_bytes", "Heap bytes allocated and in use, as go_memstats_alloc_bytes.", objects)
	s.counter("go_memstats_alloc_bytes_total", "Heap bytes allocated since the start, freed ones included (/gc/heap/allocs:bytes).", v[1])
	s.gauge("go_memstats_buck_hash_sys_bytes", "Bytes of the profiling bucket hash table.", v[2])
	s.counter("go_memstats_frees_total", "Heap objects freed since the start (tiny allocations included).", v[3]+v[4])
	s.counter("go_memstats_mallocs_total", "Heap objects allocated since the start (tiny allocations included).", v[10]+v[4])
	s.gauge("go_memstats_gc_sys_bytes", "Bytes of the garbage collector's metadata.", v[5])
	s.gauge("go_memstats_heap_idle_bytes", "Heap bytes unused: free, or given back to the system.", released+free)
	s.gauge("go_memstats_heap_inuse_bytes", "Heap bytes in spans in use (objects and the unused space of their spans).", objects+unused)
	s.gauge("go_memstats_heap_objects", "Heap objects allocated and not yet freed.", v[9])
	s.gauge("go_memstats_heap_released_bytes", "Heap bytes given back to the system.", released)
	s.gauge("go_memstats_heap_sys_bytes", "Heap bytes obtained from the system.", objects+unused+released+free)
	s.gauge("go_memstats_mcache_inuse_bytes", "Bytes of mcache structures in use.", v[11])
	s.gauge("go_memstats_mcache_sys_bytes", "Bytes of mcache structures obtained from the system.", v[11]+v[12])
	s.gauge("go_memstats_mspan_inuse_bytes", "Bytes of mspan structures in use.", v[13])
	s.gauge("go_memstats_mspan_sys_bytes", "Bytes of mspan structures obtained from the system.", v[13]+v[14])
	s.gauge("go_memstats_next_gc_bytes", "The heap size at which the next garbage collection starts (/gc/heap/goal:bytes).", v[15])
	s.gauge("go_memstats_other_sys_bytes", "Bytes of other runtime allocations.", v[16])
	s.gauge("go_memstats_stack_inuse_bytes", "Bytes of goroutine stacks in use.", v[17])
	s.gauge("go_memstats_stack_sys_bytes", "Bytes of stacks obtained from the system (the threads' own included).", v[17]+v[18])
	s.gauge("go_memstats_sys_bytes", "Bytes obtained from the system in all (/memory/classes/total:bytes).", v[19])
	s.gauge("go_gc_gogc_percent", "The collector's GOGC: the GOGC variable, or debug.SetGCPercent's (/gc/gogc:percent).", v[20])
	s.gauge("go_gc_gomemlimit_bytes", "The runtime's soft memory limit: GOMEMLIMIT, or debug.SetMemoryLimit's (/gc/gomemlimit:bytes).", v[21])
	s.gauge("go_sched_gomaxprocs_threads", "GOMAXPROCS: the threads that may run Go code at once.", v[22])
}
