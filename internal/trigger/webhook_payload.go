package trigger

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"
)

// The events whose hook fields the intake validates. Other events (Email
// and KakaoTalk Bizmessage send the same envelope with their own events)
// are accepted when every hook is a JSON object: playbooks filter by event.
const (
	EventUnsubscribe          = "UNSUBSCRIBE"
	EventMessageResultUpdate  = "MESSAGE_RESULT_UPDATE"
	EventConversionBlock      = "CONVERSION_BLOCK"
	EventInternationalReceipt = "INTERNATIONAL_DELIVERY_RECEIPT"
)

// MessageStatuses are the messageStatus values of MESSAGE_RESULT_UPDATE.
var MessageStatuses = []string{"COMPLETED", "FAILED", "CANCEL", "DUPLICATED", "FAILED_AD"}

// DLRStatuses are the dlrStatus values of INTERNATIONAL_DELIVERY_RECEIPT.
var DLRStatuses = []string{"ACCEPTED", "DELIVERED", "BUFFERED", "EXPIRED", "FAILED", "REJECTED", "UNKNOWN"}

// UnsubscribeTimeLayout is createdDateTime's format, yyyy-MM-dd'T'HH:mm:ss.SSSXXX.
const UnsubscribeTimeLayout = "2006-01-02T15:04:05.000Z07:00"

// maxHooks bounds the hooks of one delivery (each may start a run).
const maxHooks = 1000

// Delivery is one parsed webhook request body.
type Delivery struct {
	HooksID         string
	WebhookConfigID string
	ProductName     string
	AppKey          string
	Event           string
	Hooks           []map[string]any
}

// Payload is the delivery as playbooks see it under trigger.payload: the
// envelope's field names, numbers as int64 or float64.
func (d *Delivery) Payload() map[string]any {
	hooks := make([]any, len(d.Hooks))
	for i, h := range d.Hooks {
		hooks[i] = h
	}
	return map[string]any{
		"hooksId": d.HooksID, "webhookConfigId": d.WebhookConfigID, "productName": d.ProductName,
		"appKey": d.AppKey, "event": d.Event, "hooks": hooks,
	}
}

// HookKey is the idempotency key of hooks[i]: its hookId; for
// MESSAGE_RESULT_UPDATE without one, requestId and recipientSeq; else the
// delivery's hooksId and the index.
func (d *Delivery) HookKey(i int) string {
	h := d.Hooks[i]
	if id, ok := h["hookId"].(string); ok && id != "" {
		return "id:" + id
	}
	if req, ok := h["requestId"].(string); ok && req != "" {
		if seq, ok := h["recipientSeq"]; ok {
			return fmt.Sprintf("req:%s:%v", req, seq)
		}
	}
	return "idx:" + d.HooksID + ":" + strconv.Itoa(i)
}

// envelope is decoded with unknown fields refused: the spec's table of the
// body is complete, and a field we do not know means a sender we do not
// understand. Hook elements keep unknown fields (they reach the playbook),
// since only UNSUBSCRIBE's hook is fully specified.
type envelope struct {
	HooksID         *string           `json:"hooksId"`
	WebhookConfigID *string           `json:"webhookConfigId"`
	ProductName     *string           `json:"productName"`
	AppKey          *string           `json:"appKey"`
	Event           *string           `json:"event"`
	Hooks           []json.RawMessage `json:"hooks"`
}

// ParseDelivery parses and validates a request body strictly: one JSON
// object with exactly the envelope's fields, every one present and a
// non-empty string (hooks a non-empty list of objects), and the hook fields
// of known events (see EventUnsubscribe...) present with their types,
// formats and enums. The error names the offending field.
func ParseDelivery(body []byte) (*Delivery, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var env envelope
	if err := dec.Decode(&env); err != nil {
		return nil, fmt.Errorf("body is not a webhook envelope: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("body has data after the JSON object")
	}
	d := &Delivery{}
	for _, f := range []struct {
		name string
		v    *string
		dst  *string
	}{
		{"hooksId", env.HooksID, &d.HooksID},
		{"webhookConfigId", env.WebhookConfigID, &d.WebhookConfigID},
		{"productName", env.ProductName, &d.ProductName},
		{"appKey", env.AppKey, &d.AppKey},
		{"event", env.Event, &d.Event},
	} {
		if f.v == nil || *f.v == "" {
			return nil, fmt.Errorf("%s is required (a non-empty string)", f.name)
		}
		if len(*f.v) > 256 {
			return nil, fmt.Errorf("%s is longer than 256 bytes", f.name)
		}
		*f.dst = *f.v
	}
	if len(env.Hooks) == 0 {
		return nil, errors.New("hooks is required (a non-empty list)")
	}
	if len(env.Hooks) > maxHooks {
		return nil, fmt.Errorf("hooks has %d elements; at most %d are accepted", len(env.Hooks), maxHooks)
	}
	d.Hooks = make([]map[string]any, len(env.Hooks))
	for i, raw := range env.Hooks {
		h, err := decodeObject(raw)
		if err != nil {
			return nil, fmt.Errorf("hooks[%d]: %w", i, err)
		}
		if err := validateHook(d.Event, h); err != nil {
			return nil, fmt.Errorf("hooks[%d].%w", i, err)
		}
		d.Hooks[i] = h
	}
	return d, nil
}

// decodeObject decodes a JSON object, numbers as int64 when integral and
// float64 otherwise (what expressions compare against).
func decodeObject(raw json.RawMessage) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("want an object")
	}
	n, err := normalizeNumbers(m)
	if err != nil {
		return nil, err
	}
	return n.(map[string]any), nil
}

// normalizeNumbers turns json.Numbers into int64 or float64, refusing
// numbers out of float64's range (they could not be stored again).
func normalizeNumbers(v any) (any, error) {
	var err error
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, nil
		}
		f, err := x.Float64()
		if err != nil {
			return nil, fmt.Errorf("number %s is out of range", x)
		}
		return f, nil
	case map[string]any:
		for k, e := range x {
			if x[k], err = normalizeNumbers(e); err != nil {
				return nil, err
			}
		}
	case []any:
		for i, e := range x {
			if x[i], err = normalizeNumbers(e); err != nil {
				return nil, err
			}
		}
	}
	return v, nil
}

// fieldRule is one hook field's check.
type fieldRule struct {
	name     string
	required bool
	kind     string   // "string", "phone", "integer", "time"
	enum     []string // for strings
}

var hookRules = map[string][]fieldRule{
	// The spec's table: every field is given, so every field is required.
	EventUnsubscribe: {
		{name: "hookId", required: true, kind: "string"},
		{name: "recipientNo", required: true, kind: "phone"},
		{name: "unsubscribeNo", required: true, kind: "phone"},
		{name: "enterpriseName", required: true, kind: "string"},
		{name: "createdDateTime", required: true, kind: "time"},
	},
	// FIDELITY: hooks carry these; receiveDate is absent until delivered.
	EventMessageResultUpdate: {
		{name: "hookId", kind: "string"},
		{name: "requestId", required: true, kind: "string"},
		{name: "recipientSeq", required: true, kind: "integer"},
		{name: "recipientNo", required: true, kind: "phone"},
		{name: "sendNo", required: true, kind: "phone"},
		{name: "messageStatus", required: true, kind: "string", enum: MessageStatuses},
		{name: "resultCode", required: true, kind: "string"},
		{name: "requestDate", required: true, kind: "string"},
		{name: "receiveDate", kind: "string"},
	},
	// FIDELITY names the event only; the fields we know are optional.
	EventConversionBlock: {
		{name: "hookId", kind: "string"},
		{name: "recipientNo", kind: "phone"},
	},
	EventInternationalReceipt: {
		{name: "hookId", kind: "string"},
		{name: "requestId", kind: "string"},
		{name: "recipientSeq", kind: "integer"},
		{name: "recipientNo", kind: "phone"},
		{name: "dlrStatus", required: true, kind: "string", enum: DLRStatuses},
	},
}

// validateHook checks h against its event's rules; the error starts with
// the field name (the caller prefixes "hooks[i].").
func validateHook(event string, h map[string]any) error {
	for _, r := range hookRules[event] {
		v, ok := h[r.name]
		if !ok || v == nil {
			if r.required {
				return fmt.Errorf("%s is required for %s", r.name, event)
			}
			continue
		}
		if r.kind == "integer" {
			if _, ok := v.(int64); !ok {
				return fmt.Errorf("%s must be an integer", r.name)
			}
			continue
		}
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("%s must be a string", r.name)
		}
		switch {
		case r.required && s == "" && r.name != "enterpriseName":
			return fmt.Errorf("%s must not be empty", r.name)
		case r.enum != nil && !slices.Contains(r.enum, s):
			return fmt.Errorf("%s must be one of %v (got %q)", r.name, r.enum, s)
		case r.kind == "phone" && !phoneOK(s):
			return fmt.Errorf("%s must be a phone number of digits, '+' and '-' (got %q)", r.name, s)
		case r.kind == "time":
			if _, err := time.Parse(UnsubscribeTimeLayout, s); err != nil {
				return fmt.Errorf("%s must look like 2026-03-07T09:30:00.000+09:00 (got %q)", r.name, s)
			}
		}
	}
	return nil
}

func phoneOK(s string) bool {
	if s == "" || len(s) > 24 {
		return false
	}
	digits := 0
	for i, c := range s {
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c == '-':
		case c == '+' && i == 0:
		default:
			return false
		}
	}
	return digits >= 3
}
