package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	simhook "github.com/runbook/runbook/internal/sim/webhook"
	"github.com/runbook/runbook/internal/trigger"
)

// cmdSimWebhook is `runbook sim webhook`: it posts simulated messaging
// webhook deliveries to a receiver and prints what it saw.
func cmdSimWebhook(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name:  "sim webhook",
		usage: "--to URL [--event UNSUBSCRIBE] [--count N] [--duplicate-rate R] [--secret S] [--concurrency C]",
		summary: "Send realistic messaging webhook deliveries (the spec's envelope, SMS events) to a receiver, " +
			"re-send a fraction as duplicates, and report the answers and their latencies.",
		details: "Events: " + strings.Join(simhook.Events, ", ") + `.
Exit status 1 when any request failed or was not answered 200.`,
	})
	to := fs.String("to", "", "receiver `URL`, e.g. http://127.0.0.1:8080/hooks/sms")
	event := fs.String("event", "UNSUBSCRIBE", "`event` to send")
	count := fs.Int("count", 10, "`n` distinct deliveries to send")
	dup := fs.Float64("duplicate-rate", 0, "`fraction` of deliveries re-sent with the same hooksId (0..1)")
	secret := fs.String("secret", "", "signature header `value` (the secret entered at setup)")
	header := fs.String("header", trigger.SignatureHeaders[0], "signature header `name`")
	conc := fs.Int("concurrency", 1, "`n` parallel senders")
	rate := fs.Float64("rate", 0, "`n` deliveries offered per second, evenly spaced (0: as fast as they are answered)")
	seed := fs.Uint64("seed", 0, "`seed` of the deliveries (0: random; the same seed repeats the same hooksIds)")
	out := addOutputFlag(fs, "text")
	_, err := parsePositional(fs, args, 0, 0, "")
	if err != nil {
		return err
	}
	switch {
	case *to == "":
		return usageErrorf(fs.Name(), "--to is required")
	case !slices.Contains(simhook.Events, *event):
		return usageErrorf(fs.Name(), "--event: want one of %s (got %q)", strings.Join(simhook.Events, ", "), *event)
	case *count < 1 || *conc < 1:
		return usageErrorf(fs.Name(), "--count and --concurrency must be at least 1")
	case *dup < 0 || *dup > 1:
		return usageErrorf(fs.Name(), "--duplicate-rate must be between 0 and 1 (got %g)", *dup)
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	rep, err := simhook.Send(ctx, simhook.Options{
		To: *to, Event: *event, Count: *count, DuplicateRate: *dup, Secret: *secret,
		Header: *header, Concurrency: *conc, Rate: *rate, Seed: *seed,
	})
	if err != nil && rep == nil {
		return &exitError{code: 2, err: err, hint: "runbook sim webhook -h"}
	}
	if out.json {
		b, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintln(a.stdout, string(b))
	} else {
		fmt.Fprint(a.stdout, rep.String())
	}
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	if rep.ByStatus["200"] != rep.Requests {
		return &exitError{code: 1, err: fmt.Errorf("%d of %d requests were not answered 200", rep.Requests-rep.ByStatus["200"], rep.Requests),
			hint: "runbook sim webhook --to URL --secret SECRET"}
	}
	return nil
}
