package bolt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/runbook/runbook/internal/state"
)

// decodeEvent decodes an event encodeEvent wrote, as a block's reader
// does each of its events.
func decodeEvent(seq uint64, v []byte) (state.Event, error) {
	return decodeEventFields(seq, newDecoder(v))
}

// viaJSON is v's JSON round trip: what the API gives back for v.
func viaJSON[T any](t *testing.T, v T) T {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out T
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

var codecTimes = map[string]time.Time{
	"zero":                    {},
	"UTC":                     time.Date(2026, 11, 27, 9, 0, 0, 123456789, time.UTC),
	"local with a monotonic":  time.Now(),
	"offset +09:00":           time.Date(2026, 11, 27, 18, 0, 0, 5, time.FixedZone("KST", 9*3600)),
	"year 1600 (no UnixNano)": time.Date(1600, 1, 2, 3, 4, 5, 6, time.UTC),
	"year 2300 (no UnixNano)": time.Date(2300, 1, 2, 3, 4, 5, 6, time.UTC),
}

// TestCompactValuesReadBackAsJSONDoes: every event, step record, run
// record and audit record the compact encoding writes reads back exactly
// as its JSON round trip does (times in the same location, numbers in
// Data as float64, empty maps and byte strings as nil), so a run read
// from the file is the run the API and the PostgreSQL store (which keeps
// JSON) give.
func TestCompactValuesReadBackAsJSONDoes(t *testing.T) {
	for name, at := range codecTimes {
		t.Run("times "+name, func(t *testing.T) {
			ev := state.Event{Seq: 7, Time: at, Type: "step.failed", Step: "deploy[3]", Attempt: -2, Level: "WARN",
				Message: "a message of the engine's own, not shared ✓", Data: map[string]any{"n": 3, "list": []any{"a", 1.5}}}
			data, err := encodeEvent(&ev)
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeEvent(7, data)
			if err != nil {
				t.Fatal(err)
			}
			if want := viaJSON(t, ev); !reflect.DeepEqual(got, want) {
				t.Errorf("event read back as\n%#v\nwant (JSON's)\n%#v", got, want)
			}

			rec := &state.StepRecord{RunID: "r1", ID: "deploy[3]", Status: state.StepWaiting, Attempts: 3,
				Outputs: map[string]any{"id": "c1", "n": 2}, Error: &state.ErrorRecord{Code: "invalid", Message: "no", Data: map[string]any{"f": "x"}},
				Checkpoint: []byte(`{"task":"t1"}`), StartedAt: at, EndedAt: at.Add(time.Second), NextAttemptAt: at, WakeAt: at,
				Approval: &state.ApprovalRequest{Approvers: []string{"kim"}, Fields: map[string]state.ApprovalField{"n": {Type: "integer", Required: true}},
					Deadline: at, Required: 2, AllowSelfApproval: true}}
			data, err = encodeStep(rec)
			if err != nil {
				t.Fatal(err)
			}
			gotRec, err := decodeStep("r1", []byte("deploy[3]"), data)
			if err != nil {
				t.Fatal(err)
			}
			if want := viaJSON(t, rec); !reflect.DeepEqual(gotRec, want) {
				t.Errorf("step record read back as\n%#v\nwant (JSON's)\n%#v", gotRec, want)
			}
		})
	}
	for name, at := range codecTimes {
		t.Run("run records, times "+name, func(t *testing.T) {
			for _, r := range []*state.Run{
				{ID: "r1", Hash: strings.Repeat("ab", 32), CreatedAt: at},
				{ID: "r2", Playbook: "nks-upgrade", File: "pb/nks.yaml", Snapshot: []byte("steps: []\n"), Hash: "not hex",
					Inputs: map[string]any{"n": 3, "s": "x"}, Trigger: map[string]any{"type": "webhook", "key": "k"},
					Status: state.RunFailed, Error: &state.ErrorRecord{Code: "invalid", Message: "no"},
					Delivery: &state.DeliveryRef{ID: "d1", Hook: -1}, Outputs: map[string]any{"o": true},
					ParentID: "p", ParentStep: "ps", RetryOf: "r0", RetryFrom: "b", ConcurrencyKey: "ck", Owner: "vm/1@2",
					CreatedAt: at, StartedAt: at, EndedAt: at, Deadline: at, WakeAt: at, AnswerOnly: true, Sim: "http://127.0.0.1:1", TakeOver: true,
					QueuedOnKey: "nks/c1", Paused: "paused by alice: change freeze", WokenEarly: true},
				{ID: "r3", Hash: strings.Repeat("AB", 32), Inputs: map[string]any{}, Snapshot: []byte{}, Delivery: &state.DeliveryRef{ID: "d", Hook: 7}},
			} {
				want := viaJSON(t, r)
				body, err := encodeRunBody(r)
				if err != nil {
					t.Fatal(err)
				}
				sources := func(n uint64) (runSource, error) {
					if n != 300 {
						return runSource{}, fmt.Errorf("source %d", n)
					}
					return runSource{playbook: r.Playbook, file: r.File, hash: r.Hash}, nil
				}
				got, err := decodeRun(r.ID, sourcedRecord(300, body), sources)
				if err != nil || !reflect.DeepEqual(got, want) {
					t.Errorf("run record read back as\n%#v, %v\nwant (JSON's)\n%#v", got, err, want)
				}
				if id, ok, err := deliveryOfRecord(sourcedRecord(300, body)); err != nil || ok != (r.Delivery != nil) || (ok && id != r.Delivery.ID) {
					t.Errorf("the delivery of a run record read as %q, %v, %v; want %+v", id, ok, err, r.Delivery)
				}
			}
		})
	}
	for name, at := range codecTimes {
		t.Run("audit records, times "+name, func(t *testing.T) {
			for _, r := range []state.AuditRecord{
				{Seq: 9, Time: at, Identity: "server-token", Action: "run.start", Target: "playbook:waiting", Result: "ok",
					Source: "127.0.0.1:48874", Detail: map[string]any{"run": "r1", "n": 2}},
				{Seq: 10, Time: at, Identity: "kim", Action: "a later action", Result: "denied", Detail: map[string]any{}},
			} {
				data, err := encodeAudit(&r)
				if err != nil {
					t.Fatal(err)
				}
				got, err := decodeAudit(r.Seq, data)
				if want := viaJSON(t, r); err != nil || !reflect.DeepEqual(got, want) {
					t.Errorf("audit record read back as\n%#v, %v\nwant (JSON's)\n%#v", got, err, want)
				}
			}
		})
	}
	t.Run("empty values", func(t *testing.T) {
		ev := state.Event{Seq: 1, Time: codecTimes["UTC"], Type: "run.started", Data: map[string]any{}}
		data, err := encodeEvent(&ev)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeEvent(1, data)
		if want := viaJSON(t, ev); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("event read back as %#v, %v; want %#v", got, err, want)
		}
		rec := &state.StepRecord{RunID: "r", ID: "a", Outputs: map[string]any{}, Checkpoint: []byte{}}
		data, err = encodeStep(rec)
		if err != nil {
			t.Fatal(err)
		}
		gotRec, err := decodeStep("r", []byte("a"), data)
		if want := viaJSON(t, rec); err != nil || !reflect.DeepEqual(gotRec, want) {
			t.Errorf("step record read back as %#v, %v; want %#v", gotRec, err, want)
		}
	})
	t.Run("index entries", func(t *testing.T) {
		for _, e := range []indexEntry{{}, {Status: state.RunWaiting, Playbook: "nks-upgrade", ParentID: "p1"}, {Status: "a status of later", Playbook: "waiting"}} {
			got, err := decodeIndex(encodeIndex(e))
			if err != nil || got != e {
				t.Errorf("index entry %+v read back as %+v, %v", e, got, err)
			}
		}
	})
}

// TestCompactValuesAreSmall: the values a run writes most take a fraction
// of their JSON, which is what lets a waiting run's bucket fit inline.
func TestCompactValuesAreSmall(t *testing.T) {
	at := codecTimes["UTC"]
	ev := state.Event{Seq: 3, Time: at, Type: "step.started", Step: "gate", Attempt: 1, Message: "attempt 1"}
	data, err := encodeEvent(&ev)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(ev)
	if len(data) > 20 {
		t.Errorf("a step.started event takes %d bytes (JSON %d), want at most 20", len(data), len(js))
	}
	rec := &state.StepRecord{RunID: "20261127T201415-73ba0e", ID: "gate", Status: state.StepWaiting, Attempts: 1, StartedAt: at, Approval: &state.ApprovalRequest{Required: 1}}
	data, err = encodeStep(rec)
	if err != nil {
		t.Fatal(err)
	}
	js, _ = json.Marshal(rec)
	if len(data) > 40 {
		t.Errorf("a waiting approval step takes %d bytes (JSON %d), want at most 40", len(data), len(js))
	}
}

// TestCompactValuesCarryEveryField fails when state.Run, state.Event,
// state.StepRecord or state.AuditRecord gains a field: the compact encoding names no fields,
// so a new one would be dropped silently until codec.go writes it. A field
// that is not part of the stored value (json:"-", as StepRecord.Printed) is
// not encoded.
func TestCompactValuesCarryEveryField(t *testing.T) {
	for _, c := range []struct {
		v    any
		want []string
	}{
		{state.Event{}, []string{"Seq", "Time", "Type", "Step", "Attempt", "Level", "Message", "Data"}},
		{state.StepRecord{}, []string{"RunID", "ID", "Status", "Attempts", "Outputs", "Error", "Checkpoint",
			"StartedAt", "EndedAt", "NextAttemptAt", "WakeAt", "Approval"}},
		{indexEntry{}, []string{"Status", "Playbook", "ParentID"}},
		{state.AuditRecord{}, []string{"Seq", "Time", "Identity", "Action", "Target", "Result", "Source", "Detail"}},
		{state.Run{}, []string{"ID", "Playbook", "File", "Snapshot", "Hash", "Inputs", "Trigger", "Status", "Error",
			"Delivery", "Outputs", "ParentID", "ParentStep", "RetryOf", "RetryFrom", "ConcurrencyKey", "Owner",
			"CreatedAt", "StartedAt", "EndedAt", "Deadline", "WakeAt", "AnswerOnly", "Sim", "TakeOver", "QueuedOnKey", "Paused", "WokenEarly"}},
	} {
		typ := reflect.TypeOf(c.v)
		var got []string
		for i := range typ.NumField() {
			if typ.Field(i).Tag.Get("json") != "-" {
				got = append(got, typ.Field(i).Name)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s has fields %v; codec.go encodes %v: encode the new ones (at the end of the value, readable when absent) and list them here", typ, got, c.want)
		}
	}
	rec := state.StepRecord{RunID: "r", ID: "a", Status: state.StepSucceeded}
	bare, err := encodeStep(&rec)
	if err != nil {
		t.Fatal(err)
	}
	rec.Printed = []state.OutputLine{{Step: "a", Text: "printed"}}
	with, err := encodeStep(&rec)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(with, bare) {
		t.Errorf("a step record's Printed lines are encoded into it: %q", with)
	}
}

// TestCorruptCompactValuesAreErrors: a cut or padded value is reported as
// state.ErrCorrupt, never read as something else.
func TestCorruptCompactValuesAreErrors(t *testing.T) {
	ev := state.Event{Time: codecTimes["UTC"], Type: "log", Message: "hello", Data: map[string]any{"a": 1}}
	data, err := encodeEvent(&ev)
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n < len(data); n++ {
		if _, err := decodeEvent(1, data[:n]); err == nil {
			t.Errorf("an event cut to %d of %d bytes decoded", n, len(data))
		}
	}
	if _, err := decodeEvent(1, append(data, 0)); err == nil {
		t.Error("an event with a byte more decoded")
	}
}

// TestARunRecordKeepsItsSizeAsTheRunGoesOn: a run's record is rewritten
// as it starts, waits and ends; its times are written at their final size
// from the start, so these rewrites do not grow it (a record that grows
// splits the page it shares with other runs' records).
func TestARunRecordKeepsItsSizeAsTheRunGoesOn(t *testing.T) {
	at := codecTimes["UTC"]
	r := &state.Run{ID: "20261127T201415-73ba0e", Playbook: "waiting", Hash: strings.Repeat("e4", 32), Status: state.RunPending,
		Owner: "vm/22844@31302", CreatedAt: at}
	size := func() int {
		body, err := encodeRunBody(r)
		if err != nil {
			t.Fatal(err)
		}
		return len(sourcedRecord(1, body))
	}
	created := size()
	r.Status, r.StartedAt, r.Deadline = state.RunRunning, at, at.Add(time.Hour)
	started := size()
	r.Status, r.WakeAt = state.RunWaiting, at.Add(time.Minute)
	waiting := size()
	r.Status, r.WakeAt, r.EndedAt = state.RunSucceeded, time.Time{}, at.Add(time.Hour)
	ended := size()
	if started != created || waiting != created || ended != created {
		t.Errorf("a run record takes %d bytes created, %d started, %d waiting, %d ended: want the same", created, started, waiting, ended)
	}
	if created > 120 {
		t.Errorf("a run record takes %d bytes, want at most 120", created)
	}
}

// TestAShellStepsRecordIsEncodedWithFewAllocations: recording the end of
// a shell step (its record with six outputs, and the event saying it
// succeeded) takes a few allocations, not one or more per output as
// json.Marshal took (22 for these two values), once its buffer is reused.
func TestAShellStepsRecordIsEncodedWithFewAllocations(t *testing.T) {
	s := &Store{now: time.Now}
	at := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	rec := &state.StepRecord{RunID: "r1", ID: "s1", Status: state.StepSucceeded, Attempts: 1, StartedAt: at, EndedAt: at,
		Outputs: map[string]any{"exit_code": 0, "stdout": "", "stderr": "", "json": nil, "truncated": false, "duration_ms": int64(3)}}
	events := []state.Event{{Time: at, Type: "step.succeeded", Step: "s1", Attempt: 1, Message: "succeeded", Data: map[string]any{"duration_ms": int64(3)}}}
	e := new(encoder) // reused, as SaveSteps reuses the buffers in encoders
	allocs := testing.AllocsPerRun(100, func() {
		e.b = e.b[:0]
		if _, err := encodeSteps(e, []*state.StepRecord{rec}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.encodeEvents(e, events); err != nil {
			t.Fatal(err)
		}
	})
	assert.LessOrEqual(t, allocs, 2.0)
}
