package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/fault"
)

// deliveryCapacity is how many webhook deliveries the server keeps for
// GET /api/v1/deliveries.
const deliveryCapacity = 1000

// deliveryRuns is how many run IDs a logged delivery keeps (a delivery of
// 1000 hooks names 1000 runs; the log keeps 1000 deliveries).
const deliveryRuns = 100

// deliveryHead is how much of a delivery's body its hooksId, event and
// hooks are read from when the intake parsed no envelope (it read the
// body, up to server.max_body, and refused it).
const deliveryHead = 1 << 20

// deliveryLog keeps the latest webhook deliveries this process answered,
// in memory: what was received, what became of it and the runs it
// started. The runs themselves, and the deduplication, are in the store;
// this is the log the UI shows beside them, and it starts empty at each
// start of the server.
type deliveryLog struct {
	mu    sync.Mutex
	since time.Time
	ring  []api.Delivery
	next  int // index of the next write in ring
	full  bool
}

func newDeliveryLog() *deliveryLog {
	return &deliveryLog{since: time.Now(), ring: make([]api.Delivery, deliveryCapacity)}
}

func (l *deliveryLog) add(d api.Delivery) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ring[l.next] = d
	l.next = (l.next + 1) % len(l.ring)
	l.full = l.full || l.next == 0
}

// list returns the deliveries newest first that keep accepts, at most limit.
func (l *deliveryLog) list(limit int, keep func(*api.Delivery) bool) []api.Delivery {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.next
	if l.full {
		n = len(l.ring)
	}
	out := []api.Delivery{}
	for i := 1; i <= n && len(out) < limit; i++ {
		d := &l.ring[(l.next-i+len(l.ring))%len(l.ring)]
		if keep(d) {
			out = append(out, *d)
		}
	}
	return out
}

// recordDeliveries logs every webhook request that next answers.
func (m *uiMount) recordDeliveries(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		r, rep := deliveryReport(r)
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		d := api.Delivery{At: start, Route: strings.TrimPrefix(r.URL.Path, "/hooks/"), Status: rec.status,
			DurationMS: float64(time.Since(start).Microseconds()) / 1000}
		d.Runs, d.Error, d.Code = rep.Answer.Runs, rep.Refused.Error, rep.Refused.Code
		if len(d.Runs) > deliveryRuns {
			d.Runs, d.RunsTotal = d.Runs[:deliveryRuns:deliveryRuns], len(d.Runs)
		}
		switch {
		case rec.status == http.StatusOK && rep.Answer.Status == "duplicate":
			d.Outcome = "duplicate"
		case rec.status == http.StatusOK:
			d.Outcome = "accepted"
		default:
			d.Outcome = "refused"
		}
		if rep.Delivery != nil {
			d.ID, d.Event, d.Hooks = rep.Delivery.HooksID, rep.Delivery.Event, len(rep.Delivery.Hooks)
		} else {
			d.ID, d.Event, d.Hooks = envelopeOf(rep.Body[:min(len(rep.Body), deliveryHead)])
		}
		if id := r.Header.Get("webhook-id"); id != "" {
			d.ID = id
		}
		m.deliveries.add(d)
	})
}

// envelopeOf reads hooksId, event (or a Standard Webhooks body's type)
// and the number of hooks from the start of a delivery's body, as far as
// it goes.
func envelopeOf(head []byte) (id, event string, hooks int) {
	dec := json.NewDecoder(bytes.NewReader(head))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", "", 0
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return id, event, hooks
		}
		key, _ := t.(string)
		switch key {
		case "hooksId", "event", "type":
			var v any
			if dec.Decode(&v) != nil {
				return id, event, hooks
			}
			if str, ok := v.(string); ok {
				if key == "hooksId" {
					id = str
				} else if event == "" || key == "event" {
					event = str
				}
			}
		case "hooks":
			n, ok := countArray(dec)
			if !ok {
				return id, event, hooks
			}
			hooks = n
		default:
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return id, event, hooks
			}
		}
	}
	return id, event, hooks
}

// countArray reads an array and returns its length; ok is false when it
// is not a whole array.
func countArray(dec *json.Decoder) (n int, ok bool) {
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return 0, false
	}
	for dec.More() {
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return 0, false
		}
		n++
	}
	_, err := dec.Token()
	return n, err == nil
}

// listDeliveries answers GET /api/v1/deliveries?route=&outcome=&limit=.
func (m *uiMount) listDeliveries(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 200
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > deliveryCapacity {
			writeError(w, http.StatusBadRequest, fault.Invalid, "limit must be an integer in 1..1000")
			return
		}
		limit = n
	}
	route, outcome := q.Get("route"), q.Get("outcome")
	switch outcome {
	case "", "accepted", "duplicate", "refused":
	default:
		writeError(w, http.StatusBadRequest, fault.Invalid, "outcome must be accepted, duplicate or refused")
		return
	}
	list := m.deliveries.list(limit, func(d *api.Delivery) bool {
		return (route == "" || d.Route == route) && (outcome == "" || d.Outcome == outcome)
	})
	if !visible(r, "") {
		// The caller sees some playbooks only: each delivery names the
		// runs of those alone.
		seen := map[string]bool{}
		for i := range list {
			list[i].Runs = m.visibleRuns(r, list[i].Runs, seen)
		}
	}
	writeJSON(w, http.StatusOK, api.DeliveryList{Deliveries: list, Since: m.deliveries.since.UTC(), Capacity: deliveryCapacity})
}

// visibleRuns keeps the runs of ids whose playbook the caller may see;
// seen remembers the answer per run across deliveries.
func (m *uiMount) visibleRuns(r *http.Request, ids []string, seen map[string]bool) []string {
	var out []string
	for _, id := range ids {
		ok, known := seen[id]
		if !known {
			run, err := m.s.store.GetRun(r.Context(), id)
			ok = err == nil && visible(r, run.Playbook)
			seen[id] = ok
		}
		if ok {
			out = append(out, id)
		}
	}
	return out
}
