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
//  2. Done check: a claim "webhook/<route>/<hooksId>" carrying a done
//     record (Store.DedupGet) is a duplicate: it starts nothing and answers
//     200 with the first runs. One read, no commit.
//  3. Claim: Store.Dedup("webhook/<route>/<hooksId>"). The claim is
//     recorded BEFORE any run starts, so two processes (or a restart
//     racing a late request) never both start the delivery's runs.
//  4. Per-hook units also claim "webhook/<route>/unit/<playbook>/<i>/<hook
//     key>", so a hook repeated under a new hooksId starts nothing; the
//     claim's value names the run the hook started (attached after the
//     Start, or committed with it), which the answer lists instead. A
//     delivery whose every unit is such a hook is a duplicate. A hook claim
//     without a value (an earlier build; a failed write) is answered with
//     the run found by its trigger.key, as the recovery below finds runs.
//  5. Each unit is started through the Starter (durable when it returns);
//     its trigger carries "key" (the unit's identity).
//  6. Answer: the 200 is sent once every run is committed.
//  7. Done: the run IDs are attached to the claim (Store.DedupSet) after
//     the answer but before the delivery's turn (1) ends, so a redelivery
//     to this process always finds them.
//
// A claim already seen at 3 is read again for its done record (another
// process may have completed the delivery between 2 and 3): with one, the
// delivery is a duplicate. A claim without a done record means an earlier
// attempt crashed or failed between 3 and 7; the redelivery then recovers:
// for each unit it looks for a run whose trigger.key is the unit's
// (Store.ListRuns of that playbook: the Starter must commit runs to the
// same Store, as `runbook serve` does) and starts only the missing ones. So
// every delivery answered 200 has all its runs, and no unit ever has two,
// whatever the crash point; the price of a crash is one scan of a
// playbook's runs on redelivery. The done record only spares that scan,
// which is why the answer does not wait for its commit.
//
// With a Starter that is a Preparer, steps 3 to 7 are one transaction
// (Store.CommitDelivery): every unit is prepared, then the claim, the
// per-hook claims, the runs of the units not claimed before and the done
// record commit together or not at all; the runs are launched and the 200
// sent after that commit. A delivery is thus either absent (a failed
// commit leaves nothing: the redelivery starts afresh) or done: there is
// no claimed-but-not-done state to recover, and the commit settles races
// between processes (the loser finds a live claim with its done record: a
// duplicate). Only a claim left by the protocol above (an earlier build,
// or a crash of a process without a Preparer) lacks a done record; that
// delivery goes through the recovery above.
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

// deliver handles one delivery and returns its answer once the claims and
// runs are committed. With a Preparer that is one commit (commitDelivery).
// Otherwise the done record is written after the answer: it
// only spares a redelivery the recovery scan. The delivery's turn is held
// until it is written, so a redelivery to this process finds it, and
// Shutdown waits for it.
func (in *Intake) deliver(ctx context.Context, route string, d *Delivery) (*Answer, error) {
	claim := "webhook/" + route + "/" + d.HooksID
	if err := in.waitTurn(ctx, claim); err != nil {
		return nil, err
	}
	ctx = context.WithoutCancel(ctx) // commits finish even if the sender hangs up
	if p, ok := in.opts.Starter.(Preparer); ok {
		ans, err := in.commitDelivery(ctx, p, route, d, claim)
		if ans != nil || err != nil {
			in.endTurn(claim)
			return ans, err
		}
		// Claimed without a done record: recover as below.
	}
	ans, done, err := in.startRuns(ctx, route, d, claim)
	if done == nil {
		in.endTurn(claim)
		return ans, err
	}
	in.track()
	go func() {
		defer in.leave()
		defer in.endTurn(claim)
		if err := in.opts.Store.DedupSet(ctx, claim, done); err != nil {
			in.opts.Logger.Warn("webhook delivery record not written; a redelivery will look for its runs",
				"route", route, "delivery", d.HooksID, "err", err)
		}
	}()
	return ans, nil
}

// startRuns claims the delivery and starts its missing runs. done is the
// record to attach to the claim, nil for a duplicate or an error.
func (in *Intake) startRuns(ctx context.Context, route string, d *Delivery, claim string) (ans *Answer, done []byte, err error) {
	if ans, err := in.duplicate(ctx, claim); ans != nil || err != nil {
		return ans, nil, err
	}
	seen, err := in.opts.Store.Dedup(ctx, claim, in.opts.DedupTTL)
	if err != nil {
		return nil, nil, fmt.Errorf("claim delivery: %w", err)
	}
	recovering := false
	if seen {
		// Claimed before: completed by another process meanwhile, or an
		// attempt that never finished.
		if ans, err := in.duplicate(ctx, claim); ans != nil || err != nil {
			return ans, nil, err
		}
		recovering = true
		in.opts.Logger.Warn("webhook delivery was claimed but never completed; recovering", "route", route, "delivery", d.HooksID)
	}

	units, skipped := in.match(route, d)
	ans = &Answer{Status: "accepted", Runs: []string{}, Skipped: skipped}
	earlier := 0 // units skipped as hooks delivered before
	for _, u := range units {
		if u.perHook {
			hclaim := unitClaim(route, u)
			hseen, err := in.opts.Store.Dedup(ctx, hclaim, in.opts.DedupTTL)
			if err != nil {
				return nil, nil, fmt.Errorf("claim hook: %w", err)
			}
			if hseen && !recovering {
				// Delivered before under another hooksId: answer its run.
				earlier++
				v, err := in.opts.Store.DedupGet(ctx, hclaim)
				if err != nil && !errors.Is(err, state.ErrNotFound) {
					return nil, nil, fmt.Errorf("read hook record: %w", err)
				}
				ids, err := in.earlierRuns(ctx, u, v)
				if err != nil {
					return nil, nil, err
				}
				ans.Runs = append(ans.Runs, ids...)
				continue
			}
		}
		if recovering {
			id, err := in.findRun(ctx, u)
			if err != nil {
				return nil, nil, err
			}
			if id != "" {
				ans.Runs = append(ans.Runs, id)
				continue
			}
		}
		id, err := in.opts.Starter.Start(ctx, StartRequest{Playbook: u.pb, Inputs: u.inputs, Trigger: u.trig})
		if refused(err) {
			in.opts.Logger.Error("webhook trigger inputs refused", "route", route, "delivery", d.HooksID, "playbook", u.pb.Name, "err", err)
			ans.Skipped = append(ans.Skipped, u.pb.Name)
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("start %s: %w", u.pb.Name, err)
		}
		in.opts.Logger.Info("webhook started a run", "route", route, "delivery", d.HooksID, "playbook", u.pb.Name, "run_id", id)
		ans.Runs = append(ans.Runs, id)
		if u.perHook {
			// Without it a later delivery of the hook finds the run by
			// scanning (earlierRuns), so a failure here only costs that.
			if err := in.opts.Store.DedupSet(ctx, unitClaim(route, u), runsRecord(id)); err != nil {
				in.opts.Logger.Warn("webhook hook record not written", "route", route, "delivery", d.HooksID, "run_id", id, "err", err)
			}
		}
	}
	if earlier > 0 && earlier == len(units) {
		ans.Status = "duplicate"
	}
	done, _ = json.Marshal(doneRecord{Runs: ans.Runs})
	return ans, done, nil
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

// earlierRuns returns the runs a hook delivered before started, from the
// value of its claim (v), else (a claim of an earlier build, or one whose
// value was not written) by looking for the run of u.
func (in *Intake) earlierRuns(ctx context.Context, u unit, v []byte) ([]string, error) {
	var rec doneRecord
	if v != nil && json.Unmarshal(v, &rec) == nil && len(rec.Runs) > 0 {
		return rec.Runs, nil
	}
	id, err := in.findRun(ctx, u)
	if err != nil || id == "" {
		return nil, err
	}
	return []string{id}, nil
}

// commitAttempts bounds how often a delivery is prepared again when a
// generated run ID was taken (by another process in the same second).
const commitAttempts = 3

// commitDelivery prepares d's units and commits them with the claims and
// the done record in one transaction, then launches the runs created. It
// returns nil and no error when the delivery is claimed without a done
// record (see the protocol above): the caller recovers it.
func (in *Intake) commitDelivery(ctx context.Context, p Preparer, route string, d *Delivery, claim string) (*Answer, error) {
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
			if res.Value == nil {
				return nil, nil
			}
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
		// A hook claimed by an earlier build has no value: look for its run
		// (the done record committed above lacks it; it is only a hint).
		for i, j := 0, 0; i < len(du) && j < len(res.Earlier); i++ {
			if slices.Contains(res.Created, du[i].Run.ID) {
				continue
			}
			if res.Earlier[j] == nil {
				ids, err := in.earlierRuns(ctx, units[i], nil)
				if err != nil {
					return nil, err
				}
				ans.Runs = append(ans.Runs, ids...)
			}
			j++
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
// "key", the unit's identity used to find its run after a crash.
func webhookTrigger(route string, d *Delivery, payload any, key string) map[string]any {
	return map[string]any{
		"type": "webhook", "route": route, "event": d.Event, "payload": payload,
		"delivery": d.HooksID, "key": key,
	}
}

// findRun returns the ID of the run started for u, or "". The store
// looks the unit's key up (RunFilter.TriggerKey, an index on PostgreSQL).
func (in *Intake) findRun(ctx context.Context, u unit) (string, error) {
	runs, err := in.opts.Store.ListRuns(ctx, state.RunFilter{Playbook: u.pb.Name, TriggerKey: u.key})
	if err != nil {
		return "", fmt.Errorf("look for runs of %s: %w", u.pb.Name, err)
	}
	for _, r := range runs {
		if k, _ := r.Trigger["key"].(string); k == u.key && r.Trigger["route"] == u.trig["route"] {
			return r.ID, nil
		}
	}
	return "", nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
