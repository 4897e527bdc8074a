package trigger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/runbook/runbook/internal/expr"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
)

// Deduplication protocol. A delivery is identified by (route, hooksId); a
// run it may start (a "unit") by (playbook, trigger index, hook key) with
// each: hook, else by (playbook, trigger index, hooksId).
//
//  1. Within the process, concurrent requests for one delivery are
//     serialised: a redelivery waits for the request handling it.
//  2. Every unit is prepared by the Starter (a Preparer: validated, its run
//     record built, nothing committed); its trigger carries "key" (the
//     unit's identity).
//  3. One transaction (Store.CommitDelivery) commits the delivery's claim
//     "webhook/<route>/<hooksId>" with its done record (the runs it
//     started), the per-hook claims "webhook/<route>/unit/<playbook>/<i>/<hook
//     key>" (each naming its run), the runs of the units not claimed
//     before, and the delivery's body the runs refer to; or nothing. A
//     live claim of the delivery makes it a duplicate: it starts nothing
//     and answers 200 with the first runs. A hook repeated under a new
//     hooksId starts nothing and is answered with the run its claim names;
//     a delivery whose every unit is such a hook is a duplicate.
//  4. The runs committed are launched and the 200 sent.
//
// A delivery is thus either absent (a failed commit leaves nothing: the
// redelivery starts afresh) or done, whatever the crash point, and the
// commit settles races between processes (the loser finds a live claim
// with its done record: a duplicate).
//
// doneRecord is attached to a delivery's claim once its runs are committed.
type doneRecord struct {
	Runs []string `json:"runs"`
}

// unit is one run a delivery asks for.
type unit struct {
	pb      *playbook.Playbook
	trig    map[string]any
	inputs  map[string]any
	key     string // identity, stored in trig["key"]
	perHook bool
	hook    int // with perHook, the index of its hook in the delivery; else -1
}

// deliver handles one delivery and returns its answer once its claims and
// runs are committed (commitDelivery).
func (in *Intake) deliver(ctx context.Context, route string, d *Delivery) (*Answer, error) {
	claim := "webhook/" + route + "/" + d.HooksID
	if err := in.waitTurn(ctx, claim); err != nil {
		return nil, err
	}
	defer in.endTurn(claim)
	// The commit finishes even if the sender hangs up.
	return in.commitDelivery(context.WithoutCancel(ctx), route, d, claim)
}

// refused reports whether a Starter refused a run as invalid: its inputs
// do not fit the playbook (a field the trigger's inputs read is absent or
// of another type) or the playbook cannot run as written. A redelivery
// cannot mend that, so the unit is skipped (logged, named in the answer's
// skipped) like one whose `if` fails to evaluate, rather than failing the
// delivery into retries.
func refused(err error) bool {
	var se *fault.Error
	return errors.As(err, &se) && se.Code == fault.Invalid
}

// unitClaim is the dedup key of a per-hook unit.
func unitClaim(route string, u unit) string { return "webhook/" + route + "/unit/" + u.key }

// runsRecord is the value of a claim whose delivery or hook started ids.
func runsRecord(ids ...string) []byte {
	b, _ := json.Marshal(doneRecord{Runs: nonNil(ids)})
	return b
}

// commitAttempts bounds how often a delivery is prepared again when a
// generated run ID was taken (by another process in the same second).
const commitAttempts = 3

// commitDelivery prepares d's units and commits them with the claims and
// the done record in one transaction, then launches the runs created.
func (in *Intake) commitDelivery(ctx context.Context, route string, d *Delivery, claim string) (*Answer, error) {
	p := in.opts.Starter
	// CommitDelivery answers a redelivery by itself. Reading the claim
	// first saves preparing the runs of a redelivery, but costs every new
	// delivery a read (a round trip to a database): only a delivery with
	// many hooks is worth it.
	if len(d.Hooks) > precheckHooks {
		if ans, err := in.duplicate(ctx, claim); ans != nil || err != nil {
			return ans, err
		}
	}
	matched, matchSkipped := in.match(route, d)
	var body []byte // the delivery's body, stored once for its runs
	for attempt := 1; ; attempt++ {
		deliveryID := newDeliveryID(in.opts.Now())
		units, du, skipped, err := in.prepareUnits(ctx, p, route, d, matched, deliveryID, attempt == 1)
		if err != nil {
			return nil, err
		}
		skipped = append(slices.Clip(matchSkipped), skipped...)
		// unitRuns lists the runs of the units in order: created, or for a
		// unit skipped as a hook delivered before, what its claim names.
		unitRuns := func(created []string, earlier [][]byte) []string {
			runs := []string{}
			for _, u := range du {
				if len(created) > 0 && u.Run.ID == created[0] {
					runs, created = append(runs, created[0]), created[1:]
					continue
				}
				if len(earlier) > 0 {
					var rec doneRecord
					_ = json.Unmarshal(earlier[0], &rec)
					runs, earlier = append(runs, rec.Runs...), earlier[1:]
				}
			}
			return runs
		}
		done := func(created []string, earlier [][]byte) []byte {
			b, _ := json.Marshal(doneRecord{Runs: unitRuns(created, earlier)})
			return b
		}
		if body == nil && len(du) > 0 {
			if body, err = deliveryBody(p, d); err != nil {
				return nil, err
			}
		}
		res, err := in.opts.Store.CommitDelivery(ctx, state.Delivery{
			Key: claim, TTL: in.opts.DedupTTL, Units: du, Done: done, ID: deliveryID, Body: body})
		if errors.Is(err, state.ErrExists) && attempt < commitAttempts {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("commit delivery: %w", err)
		}
		if res.Duplicate {
			var rec doneRecord
			_ = json.Unmarshal(res.Value, &rec)
			return &Answer{Status: "duplicate", Runs: nonNil(rec.Runs)}, nil
		}
		runs := make([]*state.Run, 0, len(res.Created))
		for i, u := range du {
			if len(runs) < len(res.Created) && u.Run.ID == res.Created[len(runs)] {
				runs = append(runs, u.Run)
				in.opts.Logger.Info("webhook started a run", "route", route, "delivery", d.HooksID, "playbook", units[i].pb.Name, "run_id", u.Run.ID)
			}
		}
		p.Launch(runs...)
		ans := &Answer{Status: "accepted", Runs: unitRuns(res.Created, res.Earlier), Skipped: skipped}
		if len(units) > 0 && len(res.Created) == 0 {
			ans.Status = "duplicate" // every unit is a hook delivered before
		}
		return ans, nil
	}
}

// precheckHooks is the number of hooks above which a delivery's claim is
// read before its runs are prepared.
const precheckHooks = 8

// duplicate returns the answer to a delivery whose claim carries a done
// record, or nil when it has none.
func (in *Intake) duplicate(ctx context.Context, claim string) (*Answer, error) {
	b, err := in.opts.Store.DedupGet(ctx, claim)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read delivery record: %w", err)
	}
	var rec doneRecord
	_ = json.Unmarshal(b, &rec)
	return &Answer{Status: "duplicate", Runs: nonNil(rec.Runs)}, nil
}

// waitTurn serialises the requests of one delivery within the process.
func (in *Intake) waitTurn(ctx context.Context, key string) error {
	for {
		in.mu.Lock()
		ch, busy := in.inflight[key]
		if !busy {
			in.inflight[key] = make(chan struct{})
			in.mu.Unlock()
			return nil
		}
		in.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("wait for the same delivery in flight: %w", ctx.Err())
		}
	}
}

func (in *Intake) endTurn(key string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	close(in.inflight[key])
	delete(in.inflight, key)
}

// match lists the units of d: for every playbook whose webhook trigger
// names the route and the event (no events: any), one unit per delivery,
// or with each: hook one per hook; `if` is evaluated per unit (so with
// each: hook it sees trigger.hook). Playbooks whose `if` or inputs fail to
// evaluate are logged and returned as skipped.
func (in *Intake) match(route string, d *Delivery) (units []unit, skipped []string) {
	payload := d.Payload()
	for _, pb := range in.opts.Playbooks() {
		for ti, t := range pb.Triggers {
			w := t.Webhook
			if w == nil || w.Route != route || (len(w.Events) > 0 && !slices.Contains(w.Events, d.Event)) {
				continue
			}
			base := pb.Name + "/" + strconv.Itoa(ti) + "/"
			if w.Each == "hook" {
				for i, h := range d.Hooks {
					key := base + d.HookKey(i)
					trig := webhookTrigger(route, d, payload, key)
					trig["hook"] = h
					if u, ok := in.unit(pb, t, trig, key, true); ok {
						u.hook = i
						units = append(units, u)
					} else if u.pb != nil {
						skipped = append(skipped, pb.Name)
					}
				}
				continue
			}
			key := base + "delivery:" + d.HooksID
			if u, ok := in.unit(pb, t, webhookTrigger(route, d, payload, key), key, false); ok {
				units = append(units, u)
			} else if u.pb != nil {
				skipped = append(skipped, pb.Name)
			}
		}
	}
	return units, skipped
}

// unit evaluates t's `if` and inputs over trig. ok false with u.pb set
// means an evaluation error (logged); with u.pb nil, `if` was false.
func (in *Intake) unit(pb *playbook.Playbook, t *playbook.Trigger, trig map[string]any, key string, perHook bool) (u unit, ok bool) {
	scope := &expr.Scope{Trigger: trig, Now: in.opts.Now}
	fail := func(what string, err error) (unit, bool) {
		in.opts.Logger.Error("webhook trigger "+what+" failed", "playbook", pb.Name, "err", err)
		return unit{pb: pb}, false
	}
	if t.Webhook.If != nil {
		pass, err := t.Webhook.If.EvalBool(scope)
		if err != nil {
			return fail("if", err)
		}
		if !pass {
			return unit{}, false
		}
	}
	var inputs map[string]any
	if len(t.Inputs) > 0 {
		inputs = make(map[string]any, len(t.Inputs))
		for name, v := range t.Inputs {
			val, err := v.Eval(scope)
			if err != nil {
				return fail("input "+name, err)
			}
			if val == nil {
				continue // a field the payload lacks: the input's default applies
			}
			inputs[name] = val
		}
	}
	return unit{pb: pb, trig: trig, inputs: inputs, key: key, perHook: perHook, hook: -1}, true
}

// webhookTrigger is what a run sees as `trigger` (see StartRequest), plus
// "key", the unit's identity.
func webhookTrigger(route string, d *Delivery, payload any, key string) map[string]any {
	return map[string]any{
		"type": "webhook", "route": route, "event": d.Event, "payload": payload,
		"delivery": d.HooksID, "key": key,
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
