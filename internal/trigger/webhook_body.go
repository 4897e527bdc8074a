package trigger

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// A delivery is stored once: its body
// (state.Delivery.Body) is written in the transaction that creates its
// runs, under an ID drawn for it, and each run's trigger keeps only the
// small fields (type, route, event, delivery, key) and a reference to it
// (StartRequest.Delivery: the ID and the run's hook index). The engine
// resolves trigger.payload and trigger.hook from the stored body; the run
// records stay small whatever the delivery's size.

// newDeliveryID draws the ID a delivery's body is stored under: the UTC
// second, so IDs sort by time, and 80 random bits.
func newDeliveryID(now time.Time) string {
	return now.UTC().Format("20060102T150405") + "-" + rand.Text()[:16]
}

// deliveryBody is what is stored of d: its payload, redacted as the
// Preparer redacts its runs' triggers (PayloadRedactor), as JSON.
func deliveryBody(p Preparer, d *Delivery) ([]byte, error) {
	v := d.Payload()
	if r, ok := p.(PayloadRedactor); ok {
		v = r.RedactPayload(v)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode delivery %s: %w", d.HooksID, err)
	}
	return b, nil
}

// prepareUnits prepares the matched units of d for one commit attempt,
// their runs referring to the delivery stored as deliveryID: the units
// prepared and their DeliveryUnits (with their hook claims), and the
// playbooks whose inputs the Preparer refused (logged when logRefusals).
func (in *Intake) prepareUnits(ctx context.Context, p Preparer, route string, d *Delivery, matched []unit, deliveryID string, logRefusals bool) (
	units []unit, du []state.DeliveryUnit, skipped []string, err error,
) {
	units = make([]unit, 0, len(matched))
	du = make([]state.DeliveryUnit, 0, len(matched))
	for _, u := range matched {
		ref := &state.DeliveryRef{ID: deliveryID, Hook: u.hook}
		run, evs, err := p.Prepare(ctx, StartRequest{Playbook: u.pb, Inputs: u.inputs, Trigger: state.BriefTrigger(u.trig), Delivery: ref})
		if refused(err) {
			if logRefusals {
				in.opts.Logger.Error("webhook trigger inputs refused", "route", route, "delivery", d.HooksID, "playbook", u.pb.Name, "err", err)
			}
			skipped = append(skipped, u.pb.Name)
			continue
		}
		if err != nil {
			return nil, nil, nil, fmt.Errorf("start %s: %w", u.pb.Name, err)
		}
		units = append(units, u)
		du = append(du, state.DeliveryUnit{Run: run, Events: evs})
		if u.perHook {
			du[len(du)-1].Claim = unitClaim(route, u)
			du[len(du)-1].ClaimValue = runsRecord(run.ID)
		}
	}
	return units, du, skipped, nil
}
