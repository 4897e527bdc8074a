package postgres

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// Records as JSON, without reflection.
//
// The store keeps a run, a step record and an event as the JSON
// json.Marshal writes for them (the record and event columns), and
// json.Unmarshal reads them back. Through reflection, their encoding
// took a replica's processor a few percent of its time, with an
// allocation for every map entry (docs/performance.md). They are
// written here field by field, byte for byte what json.Marshal writes
// (TestRecordsAreWrittenAsJSONMarshalWritesThem fills every field of each
// type, so a field added to one and not here fails it); values of
// maps go through state.AppendJSON, and the rare fields of other types
// (an approval's request) through json.Marshal.

// jsonObject appends a JSON object's members to b.
type jsonObject struct {
	b   []byte
	n   int // members written
	err error
}

func (o *jsonObject) key(k string) {
	if o.n == 0 {
		o.b = append(o.b, '{')
	} else {
		o.b = append(o.b, ',')
	}
	o.n++
	o.b = append(o.b, '"')
	o.b = append(o.b, k...) // the keys here need no escaping
	o.b = append(o.b, '"', ':')
}

// end closes the object and returns its JSON, or the first error.
func (o *jsonObject) end() ([]byte, error) {
	if o.n == 0 {
		o.b = append(o.b, '{')
	}
	return append(o.b, '}'), o.err
}

func (o *jsonObject) str(k, v string) {
	o.key(k)
	o.b = state.AppendJSONString(o.b, v)
}

// strOmit writes a string member with omitempty.
func (o *jsonObject) strOmit(k, v string) {
	if v != "" {
		o.str(k, v)
	}
}

func (o *jsonObject) int(k string, v int64) {
	o.key(k)
	o.b = strconv.AppendInt(o.b, v, 10)
}

func (o *jsonObject) intOmit(k string, v int64) {
	if v != 0 {
		o.int(k, v)
	}
}

func (o *jsonObject) boolOmit(k string, v bool) {
	if v {
		o.key(k)
		o.b = append(o.b, "true"...)
	}
}

// time writes t as time.Time's MarshalJSON does.
func (o *jsonObject) time(k string, t time.Time) {
	o.key(k)
	o.b = append(o.b, '"')
	var err error
	if o.b, err = t.AppendText(o.b); err != nil {
		o.fail(fmt.Errorf("%s: %w", k, err)) // as json.Marshal fails: a year outside 0 to 9999
	}
	o.b = append(o.b, '"')
}

// fail keeps the first error.
func (o *jsonObject) fail(err error) {
	if o.err == nil {
		o.err = err
	}
}

// timeOmit writes a time member with omitzero.
func (o *jsonObject) timeOmit(k string, t time.Time) {
	if !t.IsZero() {
		o.time(k, t)
	}
}

// bytesOmit writes a []byte member with omitempty (base64, as
// json.Marshal writes bytes).
func (o *jsonObject) bytesOmit(k string, v []byte) {
	if len(v) == 0 {
		return
	}
	o.key(k)
	o.b = append(o.b, '"')
	o.b = base64.StdEncoding.AppendEncode(o.b, v)
	o.b = append(o.b, '"')
}

// mapOmit writes a map member with omitempty.
func (o *jsonObject) mapOmit(k string, m map[string]any) {
	if len(m) == 0 {
		return
	}
	o.key(k)
	o.value(m)
}

// value writes v as state.AppendJSON does.
func (o *jsonObject) value(v any) {
	var err error
	if o.b, err = state.AppendJSON(o.b, v); err != nil {
		o.fail(err)
	}
}

// errorOmit writes an error record member with omitempty.
func (o *jsonObject) errorOmit(k string, e *state.ErrorRecord) {
	if e == nil {
		return
	}
	o.key(k)
	inner := jsonObject{b: o.b}
	inner.str("code", e.Code)
	inner.str("message", e.Message)
	inner.mapOmit("data", e.Data)
	var err error
	if o.b, err = inner.end(); err != nil {
		o.fail(err)
	}
}

// appendRun appends run r's record, as json.Marshal writes it.
func appendRun(b []byte, r *state.Run) ([]byte, error) {
	o := jsonObject{b: b}
	o.str("id", r.ID)
	o.str("playbook", r.Playbook)
	o.strOmit("file", r.File)
	o.bytesOmit("snapshot", r.Snapshot)
	o.str("hash", r.Hash)
	o.mapOmit("inputs", r.Inputs)
	o.mapOmit("trigger", r.Trigger)
	o.str("status", string(r.Status))
	o.errorOmit("error", r.Error)
	if r.Delivery != nil {
		o.key("delivery")
		d := jsonObject{b: o.b}
		d.str("id", r.Delivery.ID)
		d.int("hook", int64(r.Delivery.Hook))
		o.b, _ = d.end()
	}
	o.mapOmit("outputs", r.Outputs)
	o.strOmit("parent_id", r.ParentID)
	o.strOmit("parent_step", r.ParentStep)
	o.strOmit("retry_of", r.RetryOf)
	o.strOmit("retry_from", r.RetryFrom)
	o.strOmit("concurrency_key", r.ConcurrencyKey)
	o.strOmit("owner", r.Owner)
	o.time("created_at", r.CreatedAt)
	o.timeOmit("started_at", r.StartedAt)
	o.timeOmit("ended_at", r.EndedAt)
	o.timeOmit("deadline", r.Deadline)
	o.timeOmit("wake_at", r.WakeAt)
	o.boolOmit("answer_only", r.AnswerOnly)
	o.strOmit("sim", r.Sim)
	o.boolOmit("take_over", r.TakeOver)
	o.strOmit("queued_on_key", r.QueuedOnKey)
	o.strOmit("paused", r.Paused)
	o.boolOmit("woken_early", r.WokenEarly)
	return o.end()
}

// appendStep appends step record rec, as json.Marshal writes it.
func appendStep(b []byte, rec *state.StepRecord) ([]byte, error) {
	o := jsonObject{b: b}
	o.str("run_id", rec.RunID)
	o.str("id", rec.ID)
	o.str("status", string(rec.Status))
	o.int("attempts", int64(rec.Attempts))
	o.mapOmit("outputs", rec.Outputs)
	o.errorOmit("error", rec.Error)
	o.bytesOmit("checkpoint", rec.Checkpoint)
	o.timeOmit("started_at", rec.StartedAt)
	o.timeOmit("ended_at", rec.EndedAt)
	o.timeOmit("next_attempt_at", rec.NextAttemptAt)
	o.timeOmit("wake_at", rec.WakeAt)
	if rec.Approval != nil {
		o.key("approval")
		o.value(rec.Approval) // a struct: through json.Marshal
	}
	return o.end()
}

// appendEvent appends event ev, as json.Marshal writes it.
func appendEvent(b []byte, ev *state.Event) ([]byte, error) {
	o := jsonObject{b: b}
	o.key("seq")
	o.b = strconv.AppendUint(o.b, ev.Seq, 10)
	o.time("time", ev.Time)
	o.str("type", ev.Type)
	o.strOmit("step", ev.Step)
	o.intOmit("attempt", int64(ev.Attempt))
	o.strOmit("level", ev.Level)
	o.strOmit("message", ev.Message)
	o.mapOmit("data", ev.Data)
	return o.end()
}
