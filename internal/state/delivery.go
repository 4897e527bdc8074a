package state

import (
	"context"
	"fmt"
	"maps"

	"github.com/runbook/runbook/internal/jsonvalue"
)

// DeliveryRef is how a run started by a webhook delivery refers to it:
// the delivery's body is stored once (Delivery.Body, read back with
// Store.GetDelivery), not in every run's trigger. The run's Trigger keeps
// the small fields (type, route, event, delivery, key); Trigger resolves
// payload and hook from the body.
type DeliveryRef struct {
	ID string `json:"id"` // Delivery.ID
	// Hook is the index in the body's hooks of the hook the run is for
	// (each: hook); -1 when the run is for the whole delivery.
	Hook int `json:"hook"`
}

// Trigger returns what a run with this reference sees as `trigger`: a
// copy of base with "payload" (the body) and, for a hook's run, "hook"
// (its element of the body's hooks). payload is shared, not copied: the
// caller must not modify it. A hook index the body does not have is an
// error (a damaged state).
func (ref DeliveryRef) Trigger(base map[string]any, payload any) (map[string]any, error) {
	out := make(map[string]any, len(base)+2)
	maps.Copy(out, base)
	out["payload"] = payload
	if ref.Hook < 0 {
		return out, nil
	}
	env, _ := payload.(map[string]any)
	hooks, _ := env["hooks"].([]any)
	if ref.Hook >= len(hooks) {
		return nil, fmt.Errorf("delivery %s has no hook %d: %w", ref.ID, ref.Hook, ErrCorrupt)
	}
	out["hook"] = hooks[ref.Hook]
	return out, nil
}

// BriefTrigger returns t without "payload" and "hook", which runs of
// earlier builds carry inline: what a run listing shows. t itself is
// returned when it has neither.
func BriefTrigger(t map[string]any) map[string]any {
	_, p := t["payload"]
	_, h := t["hook"]
	if !p && !h {
		return t
	}
	out := maps.Clone(t)
	delete(out, "payload")
	delete(out, "hook")
	return out
}

// DecodePayload decodes a stored delivery body as playbooks see it under
// trigger.payload: numbers as int64 when integral, else float64.
func DecodePayload(body []byte) (any, error) {
	v, err := jsonvalue.Decode(body)
	if err != nil {
		return nil, fmt.Errorf("decode delivery: %w: %w", ErrCorrupt, err)
	}
	return v, nil
}

// ResolveTrigger returns what run r sees as `trigger`: with the payload
// and hook of its stored delivery when it has one (r.Delivery), else
// r.Trigger as it is. For showing one run; the engine keeps the decoded
// payloads of the deliveries its runs use.
func ResolveTrigger(ctx context.Context, s Store, r *Run) (map[string]any, error) {
	if r.Delivery == nil {
		return r.Trigger, nil
	}
	body, err := s.GetDelivery(ctx, r.Delivery.ID)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", r.ID, err)
	}
	payload, err := DecodePayload(body)
	if err != nil {
		return nil, fmt.Errorf("run %s: delivery %s: %w", r.ID, r.Delivery.ID, err)
	}
	return r.Delivery.Trigger(r.Trigger, payload)
}
