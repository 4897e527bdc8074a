package trigger

import (
	"errors"
	"fmt"

	"github.com/runbook/runbook/internal/jsonvalue"
)

// The SMS events FIDELITY names. The intake checks no event's hook fields
// beyond hookId: the fields below (FIDELITY's lists) reach playbooks as
// sent under trigger.hook and trigger.payload.hooks, with every other field,
// and a playbook's `if` decides what a value it does not expect means.
// Other events (Email and KakaoTalk Bizmessage send the same envelope with
// their own) are accepted alike.
//
//	UNSUBSCRIBE                     hookId recipientNo unsubscribeNo enterpriseName createdDateTime
//	MESSAGE_RESULT_UPDATE           hookId requestId recipientSeq recipientNo sendNo messageStatus resultCode requestDate receiveDate
//	CONVERSION_BLOCK                hookId recipientNo
//	INTERNATIONAL_DELIVERY_RECEIPT  hookId requestId recipientSeq recipientNo dlrStatus
const (
	EventUnsubscribe          = "UNSUBSCRIBE"
	EventMessageResultUpdate  = "MESSAGE_RESULT_UPDATE"
	EventConversionBlock      = "CONVERSION_BLOCK"
	EventInternationalReceipt = "INTERNATIONAL_DELIVERY_RECEIPT"
)

// MessageStatuses are the messageStatus values FIDELITY lists for
// MESSAGE_RESULT_UPDATE (documentation: the intake passes any value on).
var MessageStatuses = []string{"COMPLETED", "FAILED", "CANCEL", "DUPLICATED", "FAILED_AD"}

// DLRStatuses are the dlrStatus values FIDELITY lists for
// INTERNATIONAL_DELIVERY_RECEIPT (documentation, as MessageStatuses).
var DLRStatuses = []string{"ACCEPTED", "DELIVERED", "BUFFERED", "EXPIRED", "FAILED", "REJECTED", "UNKNOWN"}

// UnsubscribeTimeLayout is createdDateTime's format, yyyy-MM-dd'T'HH:mm:ss.SSSXXX.
const UnsubscribeTimeLayout = "2006-01-02T15:04:05.000Z07:00"

// maxHooks bounds the hooks of one delivery (each may start a run); maxID
// bounds hooksId, hookId and event (they become store keys).
const (
	maxHooks = 1000
	maxID    = 256
)

// Delivery is one parsed webhook request body.
type Delivery struct {
	HooksID string // the delivery's idempotency key (hooksId, or webhook-id)
	Event   string // "" when a generic body names none
	// Hooks are the envelope's hooks, each with a non-empty string hookId;
	// none for a generic (Standard Webhooks) body.
	Hooks []map[string]any
	// payload is the body as sent (numbers as int64 or float64): for an
	// envelope every field, known or not, its hooks the maps of Hooks.
	payload any
}

// Payload is the delivery as playbooks see it under trigger.payload: the
// body as sent, numbers as int64 or float64.
func (d *Delivery) Payload() any { return d.payload }

// HookKey is the idempotency key of hooks[i]: its hookId.
func (d *Delivery) HookKey(i int) string {
	id, _ := d.Hooks[i]["hookId"].(string)
	return "id:" + id
}

// ParseDelivery parses a request body liberally: one JSON object with a
// non-empty string hooksId and event and a non-empty list hooks of
// objects, each with a non-empty string hookId. Those are all the intake
// needs (the keys it deduplicates by, the event it routes by); every other
// field, of the envelope or a hook, known or not and of whatever type, is
// recorded as sent for the playbooks' `if` and inputs. The error names the
// offending field.
func ParseDelivery(body []byte) (*Delivery, error) {
	v, err := jsonvalue.Decode(body)
	if err != nil {
		return nil, fmt.Errorf("body is not a webhook envelope: %w", err)
	}
	env, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("body is not a webhook envelope: want a JSON object")
	}
	d := &Delivery{payload: env}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"hooksId", &d.HooksID}, {"event", &d.Event}} {
		s, err := idField(env[f.name])
		if err != nil {
			return nil, fmt.Errorf("%s %w", f.name, err)
		}
		*f.dst = s
	}
	hooks, ok := env["hooks"].([]any)
	if !ok || len(hooks) == 0 {
		return nil, errors.New("hooks is required (a non-empty list)")
	}
	if len(hooks) > maxHooks {
		return nil, fmt.Errorf("hooks has %d elements; at most %d are accepted", len(hooks), maxHooks)
	}
	d.Hooks = make([]map[string]any, len(hooks))
	for i, e := range hooks {
		h, ok := e.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("hooks[%d]: want an object", i)
		}
		if _, err := idField(h["hookId"]); err != nil {
			return nil, fmt.Errorf("hooks[%d].hookId %w", i, err)
		}
		d.Hooks[i] = h
	}
	return d, nil
}

// ParseGeneric parses the body of a Standard Webhooks route: any one JSON
// value, recorded whole as the payload. id (the webhook-id header) is the
// delivery's key; the event is the body's "type" when it is a string (the
// Standard Webhooks payload convention), else "".
func ParseGeneric(id string, body []byte) (*Delivery, error) {
	if len(id) > maxID {
		return nil, fmt.Errorf("webhook-id is longer than %d bytes", maxID)
	}
	v, err := jsonvalue.Decode(body)
	if err != nil {
		return nil, fmt.Errorf("body is not JSON: %w", err)
	}
	d := &Delivery{HooksID: id, payload: v}
	if m, ok := v.(map[string]any); ok {
		d.Event, _ = m["type"].(string)
	}
	return d, nil
}

// idField checks a key field: the error completes "<name> ".
func idField(v any) (string, error) {
	s, ok := v.(string)
	switch {
	case !ok || s == "":
		return "", errors.New("is required (a non-empty string)")
	case len(s) > maxID:
		return "", fmt.Errorf("is longer than %d bytes", maxID)
	}
	return s, nil
}
