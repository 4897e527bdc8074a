package benche2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/sim/webhook"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/tools/internal/serveproc"
)

// Throughput is what the senders of one load saw, and when its runs ended.
type Throughput struct {
	Deliveries int
	PerSec     float64 // deliveries whose runs all finished, per second of the whole
	AckP50     time.Duration
	AckP99     time.Duration // with several replicas, the worst replica's
	Refused    int           // answers other than 200
	// CPU is the processor time a run took of each part, from the first
	// delivery sent to the last run finished; CPUErr says why PostgreSQL's
	// part is not measured (a server on another machine).
	CPU    serveproc.Use
	CPUErr error
}

// Deliveries sends n deliveries of one hook each from conc senders to the
// log route, spread evenly over the replicas, and waits until every run
// they started finished (within timeout).
func (c *Cluster) Deliveries(ctx context.Context, n, conc int, timeout time.Duration) (Throughput, error) {
	return c.deliveries(ctx, "log", n, conc, 0, timeout)
}

// SMS sends n deliveries of one hook each from conc senders to the sms
// route at rate deliveries a second in all, each starting a run of the
// shipped sms-unsubscribe playbook (a concurrency key a number, a
// file.line append, a log), and waits until every run finished.
func (c *Cluster) SMS(ctx context.Context, n, conc int, rate float64, timeout time.Duration) (Throughput, error) {
	return c.deliveries(ctx, "sms", n, conc, rate, timeout)
}

func (c *Cluster) deliveries(ctx context.Context, route string, n, conc int, rate float64, timeout time.Duration) (Throughput, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	before, err := c.finished(ctx)
	if err != nil {
		return Throughput{}, err
	}
	cpu := c.cpu()
	reps, err := c.send(ctx, route, n, conc, rate)
	if err != nil {
		return Throughput{}, err
	}
	start := time.Now().Add(-reps[0].Elapsed)
	out := Throughput{}
	for _, r := range reps {
		out.Deliveries += r.Deliveries
		out.AckP50 = max(out.AckP50, r.P50)
		out.AckP99 = max(out.AckP99, r.P99)
		out.Refused += r.Requests - r.ByStatus["200"]
	}
	if err := c.waitFinished(ctx, before, out.Deliveries-out.Refused); err != nil {
		return out, err
	}
	out.PerSec = float64(out.Deliveries) / time.Since(start).Seconds()
	out.CPU, out.CPUErr = c.cpu().Since(cpu).Per(out.Deliveries-out.Refused), c.pmErr
	return out, nil
}

// send posts n one-hook deliveries to route, split over the live
// replicas, conc senders and rate deliveries a second in all (0: as fast
// as answered).
func (c *Cluster) send(ctx context.Context, route string, n, conc int, rate float64) ([]*webhook.Report, error) {
	var live []string
	for _, s := range c.Replicas {
		if s.Cmd.ProcessState == nil {
			live = append(live, s.URL)
		}
	}
	reps := make([]*webhook.Report, len(live))
	errs := make([]error, len(live))
	var wg sync.WaitGroup
	seed := uint64(time.Now().UnixNano())
	for i, u := range live {
		wg.Go(func() {
			reps[i], errs[i] = webhook.Send(ctx, webhook.Options{
				To: u + "/hooks/" + route, Event: "UNSUBSCRIBE", Count: n / len(live), Secret: secret,
				Concurrency: max(conc/len(live), 1), MaxHooks: 1, Rate: rate / float64(len(live)), Seed: seed + uint64(i)<<32,
			})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return reps, nil
}

// Latency is a distribution's median and 99th percentile.
type Latency struct {
	N        int
	P50, P99 time.Duration
	// CPU and CPUErr are as in Throughput, over the load that measured
	// the latency (when it was a load of the cluster: Dispatch).
	CPU    serveproc.Use
	CPUErr error
}

func latencyOf(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	slices.Sort(ds)
	return Latency{N: len(ds), P50: ds[len(ds)/2], P99: ds[min(len(ds)-1, len(ds)*99/100)]}
}

// Dispatch starts n runs of the dispatch playbook at rate runs a second
// and returns, over the runs, the time from step a's call reaching the
// receiver to step b's: a's answer read, a's end and b's start on record,
// b's request sent.
func (c *Cluster) Dispatch(ctx context.Context, n int, rate float64, timeout time.Duration) (Latency, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c.calls.reset()
	before, err := c.finished(ctx)
	if err != nil {
		return Latency{}, err
	}
	cpu := c.cpu()
	reps, err := c.send(ctx, "dispatch", n, 32, rate)
	if err != nil {
		return Latency{}, err
	}
	sent := 0
	for _, r := range reps {
		sent += r.ByStatus["200"]
	}
	if err := c.waitFinished(ctx, before, sent); err != nil {
		return Latency{}, err
	}
	ds, partial := c.calls.gaps()
	if len(ds) < sent {
		return Latency{}, fmt.Errorf("%d of %d runs called twice (%d once)", len(ds), sent, partial)
	}
	out := latencyOf(ds)
	out.CPU, out.CPUErr = c.cpu().Since(cpu).Per(sent), c.pmErr
	return out, nil
}

// Failover starts a run of the failover playbook through replica 0, kills
// replica 0 with SIGKILL once the run's first step started, and returns
// the time from the kill to the first event another replica wrote to the
// run (its takeover), and to the run's end.
func (c *Cluster) Failover(ctx context.Context, timeout time.Duration) (takeover, finished time.Duration, err error) {
	if len(c.Replicas) < 2 {
		return 0, 0, errors.New("failover needs two replicas or more")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var run api.Run
	if err := c.call(ctx, "POST", c.Replicas[0].URL+"/api/v1/playbooks/bench-failover/runs", strings.NewReader(`{}`), &run); err != nil {
		return 0, 0, err
	}
	events := "/api/v1/runs/" + run.ID + "/events"
	// the run's step is running on replica 0
	if _, err := c.poll(ctx, events, func(ev api.EventPage) bool {
		return slices.ContainsFunc(ev.Events, func(e state.Event) bool { return e.Type == "step.started" })
	}); err != nil {
		return 0, 0, fmt.Errorf("wait for the failover run's step: %w", err)
	}
	killed, err := c.kill(0)
	if err != nil {
		return 0, 0, err
	}
	var first time.Time
	page, err := c.poll(ctx, events, func(ev api.EventPage) bool {
		for _, e := range ev.Events {
			if e.Time.After(killed) && first.IsZero() {
				first = e.Time
			}
		}
		return ev.Status.Done()
	})
	if err != nil {
		return 0, 0, fmt.Errorf("wait for the takeover: %w", err)
	}
	if first.IsZero() {
		return 0, 0, fmt.Errorf("run %s ended %s with no event after the kill", run.ID, page.Status)
	}
	last := page.Events[len(page.Events)-1].Time
	return first.Sub(killed), last.Sub(killed), nil
}

// poll reads the events of a run from the first live replica every 20 ms
// until done holds.
func (c *Cluster) poll(ctx context.Context, path string, done func(api.EventPage) bool) (api.EventPage, error) {
	for {
		for i, s := range c.Replicas {
			if s.Cmd.ProcessState != nil {
				continue
			}
			var page api.EventPage
			if err := c.get(ctx, i, path, &page); err == nil && done(page) {
				return page, nil
			}
			break
		}
		select {
		case <-ctx.Done():
			return api.EventPage{}, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
