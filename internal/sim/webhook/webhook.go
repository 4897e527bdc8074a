// Package webhook is the simulator's webhook sender: it posts realistic
// messaging-service deliveries (spec/webhook-and-ml-sdk.md part (a) and the
// SMS events of FIDELITY) to a receiver, re-sends a fraction of them as a
// real sender retries, and reports the answers and their latencies. It
// drives `runbook sim webhook`, the intake's end-to-end tests and its load
// figures.
//
// Deliveries are a pure function of (Seed, Event, index), so a run can be
// repeated exactly whatever the concurrency.
package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Events are the events Send can generate.
var Events = []string{"UNSUBSCRIBE", "MESSAGE_RESULT_UPDATE", "CONVERSION_BLOCK", "INTERNATIONAL_DELIVERY_RECEIPT"}

// Options configure Send.
type Options struct {
	To            string  // receiver URL, e.g. http://127.0.0.1:8080/hooks/sms
	Event         string  // one of Events (default UNSUBSCRIBE)
	Count         int     // distinct deliveries (default 1)
	DuplicateRate float64 // fraction re-sent with the same hooksId, 0..1
	Secret        string  // signature header value
	Header        string  // signature header name (default X-Cloud-Webhook-Signature)
	Concurrency   int     // parallel senders (default 1)
	// Rate paces the deliveries: at most Rate a second are handed to the
	// senders, evenly spaced (0: as fast as the senders answer).
	Rate float64
	Seed uint64
	// MaxHooks bounds the hooks per delivery (1..MaxHooks; default 3).
	MaxHooks int
	Client   *http.Client     // default: a client with a 10 s timeout that keeps a connection a sender
	Now      func() time.Time // event times; default time.Now
}

// Report is what Send observed.
type Report struct {
	Deliveries int            `json:"deliveries"` // distinct deliveries sent
	Duplicates int            `json:"duplicates"` // re-sends of an earlier delivery
	Requests   int            `json:"requests"`   // Deliveries + Duplicates
	Hooks      int            `json:"hooks"`      // hooks across distinct deliveries
	ByStatus   map[string]int `json:"by_status"`  // "200", "401", ... and "error" for transport failures
	// ByAnswer counts the "status" field of 200 answers (accepted, duplicate).
	ByAnswer map[string]int `json:"by_answer"`
	Errors   []string       `json:"errors,omitempty"` // the first few transport errors
	Elapsed  time.Duration  `json:"elapsed_ns"`
	PerSec   float64        `json:"per_second"`
	P50      time.Duration  `json:"p50_ns"`
	P90      time.Duration  `json:"p90_ns"`
	P99      time.Duration  `json:"p99_ns"`
	Max      time.Duration  `json:"max_ns"`
}

// String is the human form of the report.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sent %d requests (%d deliveries, %d duplicates, %d hooks) in %s: %.0f/s\n",
		r.Requests, r.Deliveries, r.Duplicates, r.Hooks, r.Elapsed.Round(time.Millisecond), r.PerSec)
	fmt.Fprintf(&b, "latency p50 %s  p90 %s  p99 %s  max %s\n", fmtDur(r.P50), fmtDur(r.P90), fmtDur(r.P99), fmtDur(r.Max))
	fmt.Fprintf(&b, "status %s\n", fmtCounts(r.ByStatus))
	if len(r.ByAnswer) > 0 {
		fmt.Fprintf(&b, "answers %s\n", fmtCounts(r.ByAnswer))
	}
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "error: %s\n", e)
	}
	return b.String()
}

func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}

func fmtCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}

// Send posts opts.Count deliveries and, with probability DuplicateRate
// each, sends a delivery again right after its answer (as a sender
// retrying after a timeout). It returns when every request was answered or
// ctx ended; transport errors are counted, not returned. The error is for
// bad options and cancellation.
func Send(ctx context.Context, opts Options) (*Report, error) {
	if opts.To == "" {
		return nil, errors.New("webhook sender: a target URL is required")
	}
	if opts.Event == "" {
		opts.Event = "UNSUBSCRIBE"
	}
	if !slices.Contains(Events, opts.Event) {
		return nil, fmt.Errorf("webhook sender: unknown event %q (want one of %s)", opts.Event, strings.Join(Events, ", "))
	}
	if opts.DuplicateRate < 0 || opts.DuplicateRate > 1 {
		return nil, fmt.Errorf("webhook sender: duplicate rate %g is not between 0 and 1", opts.DuplicateRate)
	}
	if opts.Rate < 0 {
		return nil, fmt.Errorf("webhook sender: rate %g is negative", opts.Rate)
	}
	opts.Count = max(opts.Count, 1)
	opts.Concurrency = max(opts.Concurrency, 1)
	if opts.MaxHooks <= 0 {
		opts.MaxHooks = 3
	}
	if opts.Header == "" {
		opts.Header = "X-Cloud-Webhook-Signature"
	}
	if opts.Client == nil {
		// Each sender keeps its connection between deliveries: the
		// default transport keeps two idle connections a host, so all
		// senders but two would dial again for every delivery.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = opts.Concurrency
		defer tr.CloseIdleConnections()
		opts.Client = &http.Client{Timeout: 10 * time.Second, Transport: tr}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}

	rep := &Report{ByStatus: map[string]int{}, ByAnswer: map[string]int{}}
	var mu sync.Mutex
	var lat []time.Duration
	record := func(status string, answer string, d time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		rep.Requests++
		rep.ByStatus[status]++
		if answer != "" {
			rep.ByAnswer[answer]++
		}
		if err != nil && len(rep.Errors) < 5 {
			rep.Errors = append(rep.Errors, err.Error())
		}
		lat = append(lat, d)
	}
	jobs := make(chan int)
	start := time.Now()
	var wg sync.WaitGroup
	for range opts.Concurrency {
		wg.Go(func() {
			for i := range jobs {
				rng := rand.New(rand.NewPCG(opts.Seed^eventSeed(opts.Event), uint64(i)))
				body, hooks := Delivery(rng, opts.Event, i, opts.MaxHooks, opts.Now())
				mu.Lock()
				rep.Deliveries++
				rep.Hooks += hooks
				mu.Unlock()
				record(post(ctx, opts, body))
				if rng.Float64() < opts.DuplicateRate {
					mu.Lock()
					rep.Duplicates++
					mu.Unlock()
					record(post(ctx, opts, body))
				}
			}
		})
	}
feed:
	for i := range opts.Count {
		if opts.Rate > 0 {
			at := start.Add(time.Duration(float64(i) / opts.Rate * float64(time.Second)))
			if d := time.Until(at); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					break feed
				}
			}
		}
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	rep.Elapsed = time.Since(start)
	if rep.Elapsed > 0 {
		rep.PerSec = float64(rep.Requests) / rep.Elapsed.Seconds()
	}
	slices.Sort(lat)
	rep.P50, rep.P90, rep.P99 = pct(lat, 0.50), pct(lat, 0.90), pct(lat, 0.99)
	if len(lat) > 0 {
		rep.Max = lat[len(lat)-1]
	}
	if err := ctx.Err(); err != nil {
		return rep, fmt.Errorf("webhook sender: %w", err)
	}
	return rep, nil
}

// eventSeed mixes the event into the seed, so that two events sent with
// one seed do not share hooksIds.
func eventSeed(event string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(event))
	return h.Sum64()
}

// pct is the q-quantile of sorted durations (nearest rank).
func pct(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// post sends one request and returns its status ("error" when the request
// failed), the answer's "status" field, and the latency.
func post(ctx context.Context, opts Options, body []byte) (string, string, time.Duration, error) {
	t0 := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, opts.To, bytes.NewReader(body))
	if err != nil {
		return "error", "", 0, err
	}
	req.Header.Set("Content-Type", "application/json;charset=UTF-8")
	if opts.Secret != "" {
		req.Header.Set(opts.Header, opts.Secret)
	}
	resp, err := opts.Client.Do(req)
	if err != nil {
		return "error", "", time.Since(t0), err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	d := time.Since(t0)
	var ans struct {
		Status string `json:"status"`
	}
	if resp.StatusCode == http.StatusOK {
		_ = json.Unmarshal(raw, &ans)
	}
	return fmt.Sprint(resp.StatusCode), ans.Status, d, nil
}
