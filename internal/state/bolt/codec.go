package bolt

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// The compact encoding of the values a run writes most: events, step
// records, the listing index entry, run records (sourcedTag) and audit
// records.
//
// A compact value is compactTag then fields in a fixed order, with no
// names: strings and byte strings as a uvarint then the bytes, integers as
// varints, times as encodeTime writes them, maps and structs the store
// does not look into as their JSON (empty: absent). What the key already
// says is not repeated: an event's Seq, a step record's RunID and ID.
// Strings that the engine writes again and again (event types, statuses,
// common messages) are written as an index into sharedStrings.
//
// codec_test.go fails when state.Run, state.Event, state.StepRecord,
// state.AuditRecord or indexEntry gains a field this encoding does not
// carry. Once released, a field added is written after the others and
// read only when bytes remain, so that the values written before it still
// read (see the state package's "Formats").
const compactTag = 0x01

// sharedStrings are written as their index. The list is part of the file
// format: entries may be added at the end, never changed or removed.
var sharedStrings = []string{
	"",
	// run and step statuses
	"pending", "running", "waiting", "suspended", "succeeded", "failed", "cancelled", "skipped",
	// event types
	"run.created", "run.started", "run.succeeded", "run.failed", "run.cancelled", "run.waiting",
	"run.resumed", "run.queued", "run.suspended", "run.skipped",
	"step.started", "step.succeeded", "step.failed", "step.skipped", "step.retry", "step.waiting",
	"step.reused", "step.reconciled", "step.cancelled",
	"log", "approval.requested", "approval.answered", "approval.timed_out",
	// log levels
	"DEBUG", "INFO", "WARN", "ERROR",
	// messages
	"attempt 1", "attempt 2", "attempt 3", "run started", "run succeeded", "run failed",
	"run cancelled", "condition is false", "waiting for approval", "run is waiting for an approval",
	"run timed out", "a step failed",
	// audit records
	"run.start", "run.approve", "run.cancel", "run.retry", "run.resume", "token.create", "token.revoke",
	"ok", "denied", "server-token",
}

var sharedIndex = func() map[string]uint64 {
	m := make(map[string]uint64, len(sharedStrings))
	for i, s := range sharedStrings {
		m[s] = uint64(i)
	}
	return m
}()

// isCompact reports whether v starts as a compact value does.
func isCompact(v []byte) bool { return len(v) > 0 && v[0] == compactTag }

// encoder appends a compact value's fields.
type encoder struct{ b []byte }

func newEncoder(size int) *encoder {
	e := &encoder{b: make([]byte, 1, size)}
	e.b[0] = compactTag
	return e
}

func (e *encoder) uint(n uint64) { e.b = binary.AppendUvarint(e.b, n) }
func (e *encoder) int(n int64)   { e.b = binary.AppendVarint(e.b, n) }

func (e *encoder) bytes(p []byte) {
	e.uint(uint64(len(p)))
	e.b = append(e.b, p...)
}

// str writes a shared string as 2*index+1, another as 2*len then its bytes.
func (e *encoder) str(s string) {
	if i, ok := sharedIndex[s]; ok {
		e.uint(2*i + 1)
		return
	}
	e.uint(2 * uint64(len(s)))
	e.b = append(e.b, s...)
}

// Time kinds: the zero time; a UTC time (what JSON decodes any time with a
// zero offset to) as 8 bytes of Unix nanoseconds; any other time as its
// RFC 3339 text, decoded as JSON would.
const (
	timeZero = 0
	timeUTC  = 1
	timeText = 2
)

// minNano and maxNano bound the times UnixNano represents.
var (
	minNano = time.Unix(0, math.MinInt64)
	maxNano = time.Unix(0, math.MaxInt64)
)

func (e *encoder) time(t time.Time) error {
	switch _, off := t.Zone(); {
	case t.IsZero():
		e.b = append(e.b, timeZero)
	case off == 0 && !t.Before(minNano) && !t.After(maxNano):
		e.b = append(e.b, timeUTC)
		e.b = binary.BigEndian.AppendUint64(e.b, uint64(t.UnixNano()))
	default:
		text, err := t.MarshalText()
		if err != nil {
			return err
		}
		e.b = append(e.b, timeText)
		e.bytes(text)
	}
	return nil
}

// json writes v's JSON (state.AppendJSON), or nothing (length 0) when v is
// empty. The JSON is appended in place, then its length put before it.
func (e *encoder) json(v any, empty bool) error {
	if empty {
		e.uint(0)
		return nil
	}
	start := len(e.b)
	b, err := state.AppendJSON(e.b, v)
	if err != nil {
		return err
	}
	n := len(b) - start
	var size [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(size[:], uint64(n))
	b = append(b, size[:k]...)
	copy(b[start+k:], b[start:start+n])
	copy(b[start:], size[:k])
	e.b = b
	return nil
}

// decoder reads a compact value's fields; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

var errShort = errors.New("value ends early")

func newDecoder(v []byte) *decoder {
	if !isCompact(v) {
		return &decoder{err: errors.New("not a compact value")}
	}
	return &decoder{b: v[1:]}
}

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

func (d *decoder) uint() uint64 {
	n, k := binary.Uvarint(d.b)
	if k <= 0 {
		d.fail(errShort)
		return 0
	}
	d.b = d.b[k:]
	return n
}

func (d *decoder) int() int64 {
	n, k := binary.Varint(d.b)
	if k <= 0 {
		d.fail(errShort)
		return 0
	}
	d.b = d.b[k:]
	return n
}

func (d *decoder) take(n uint64) []byte {
	if n > uint64(len(d.b)) {
		d.fail(errShort)
		return nil
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

// bytes returns a copy (nil when empty): values are only valid inside
// their transaction.
func (d *decoder) bytes() []byte {
	p := d.take(d.uint())
	if len(p) == 0 {
		return nil
	}
	return append([]byte(nil), p...)
}

func (d *decoder) str() string {
	x := d.uint()
	if x%2 == 1 {
		i := x / 2
		if i >= uint64(len(sharedStrings)) {
			d.fail(fmt.Errorf("shared string %d of %d", i, len(sharedStrings)))
			return ""
		}
		return sharedStrings[i]
	}
	return string(d.take(x / 2))
}

func (d *decoder) time() time.Time {
	kind := d.take(1)
	if kind == nil {
		return time.Time{}
	}
	switch kind[0] {
	case timeZero:
		return time.Time{}
	case timeUTC:
		p := d.take(8)
		if p == nil {
			return time.Time{}
		}
		return time.Unix(0, int64(binary.BigEndian.Uint64(p))).UTC()
	case timeZeroPadded:
		d.take(8)
		return time.Time{}
	case timeText:
		var t time.Time
		if err := t.UnmarshalText(d.take(d.uint())); err != nil {
			d.fail(err)
		}
		return t
	}
	d.fail(fmt.Errorf("time kind %d", kind[0]))
	return time.Time{}
}

// json decodes a value json wrote into v (left alone when empty).
func (d *decoder) json(v any) {
	p := d.take(d.uint())
	if len(p) == 0 || d.err != nil {
		return
	}
	if err := json.Unmarshal(p, v); err != nil {
		d.fail(err)
	}
}

// done reports the first error, or bytes left over.
func (d *decoder) done() error {
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%d bytes left over", len(d.b))
	}
	return d.err
}

// encodeEvent encodes ev without its Seq (its key holds it).
func encodeEvent(ev *state.Event) ([]byte, error) {
	e := &encoder{b: make([]byte, 0, 48+len(ev.Message)+len(ev.Step))}
	return e.event(ev)
}

// event appends ev, encoded as encodeEvent does, to e.b and returns it.
// Several values appended to one encoder share its buffer: each is a
// slice of it that the values appended after it leave as it is.
func (e *encoder) event(ev *state.Event) ([]byte, error) {
	start := len(e.b)
	e.b = append(e.b, compactTag)
	if err := e.time(ev.Time); err != nil {
		return nil, err
	}
	e.str(ev.Type)
	e.str(ev.Step)
	e.int(int64(ev.Attempt))
	e.str(ev.Level)
	e.str(ev.Message)
	if err := e.json(ev.Data, len(ev.Data) == 0); err != nil {
		return nil, err
	}
	return e.b[start:len(e.b):len(e.b)], nil
}

// decodeEventFields decodes an event's fields (what follows compactTag).
func decodeEventFields(seq uint64, d *decoder) (state.Event, error) {
	var ev state.Event
	ev.Seq = seq
	ev.Time = d.time()
	ev.Type = d.str()
	ev.Step = d.str()
	ev.Attempt = int(d.int())
	ev.Level = d.str()
	ev.Message = d.str()
	d.json(&ev.Data)
	if err := d.done(); err != nil {
		return ev, fmt.Errorf("decode event %d: %w: %w", seq, state.ErrCorrupt, err)
	}
	return ev, nil
}

// encodeStep encodes rec without its RunID and ID (its bucket and key
// hold them).
func encodeStep(rec *state.StepRecord) ([]byte, error) {
	e := &encoder{b: make([]byte, 0, 64+len(rec.Checkpoint))}
	return e.step(rec)
}

// step appends rec, encoded as encodeStep does, to e.b and returns it (see
// event).
func (e *encoder) step(rec *state.StepRecord) ([]byte, error) {
	start := len(e.b)
	e.b = append(e.b, compactTag)
	e.str(string(rec.Status))
	e.int(int64(rec.Attempts))
	if err := e.json(rec.Outputs, len(rec.Outputs) == 0); err != nil {
		return nil, err
	}
	if err := e.json(rec.Error, rec.Error == nil); err != nil {
		return nil, err
	}
	e.bytes(rec.Checkpoint)
	for _, t := range []time.Time{rec.StartedAt, rec.EndedAt, rec.NextAttemptAt, rec.WakeAt} {
		if err := e.time(t); err != nil {
			return nil, err
		}
	}
	if err := e.json(rec.Approval, rec.Approval == nil); err != nil {
		return nil, err
	}
	return e.b[start:len(e.b):len(e.b)], nil
}

// decodeStep decodes the record of step id of run runID.
func decodeStep(runID string, id, v []byte) (*state.StepRecord, error) {
	rec := new(state.StepRecord)
	d := newDecoder(v)
	rec.RunID, rec.ID = runID, string(id)
	rec.Status = state.StepStatus(d.str())
	rec.Attempts = int(d.int())
	d.json(&rec.Outputs)
	d.json(&rec.Error)
	rec.Checkpoint = d.bytes()
	rec.StartedAt = d.time()
	rec.EndedAt = d.time()
	rec.NextAttemptAt = d.time()
	rec.WakeAt = d.time()
	d.json(&rec.Approval)
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("decode step %s: %w: %w", id, state.ErrCorrupt, err)
	}
	return rec, nil
}

// encodeIndex encodes a runs_by_created value.
func encodeIndex(e indexEntry) []byte {
	enc := newEncoder(4 + len(e.Playbook) + len(e.ParentID))
	enc.str(string(e.Status))
	enc.str(e.Playbook)
	enc.str(e.ParentID)
	return enc.b
}

// decodeIndex decodes a runs_by_created value.
func decodeIndex(v []byte) (indexEntry, error) {
	var e indexEntry
	d := newDecoder(v)
	e.Status = state.RunStatus(d.str())
	e.Playbook = d.str()
	e.ParentID = d.str()
	if err := d.done(); err != nil {
		return e, fmt.Errorf("decode run index: %w: %w", state.ErrCorrupt, err)
	}
	return e, nil
}

// timeZeroPadded is a zero time followed by 8 unused bytes: the run
// record writes its times that are set later (start, end, deadline,
// wake) at their final size, so that a rewrite as the run goes on does
// not grow the record and split its page.
const timeZeroPadded = 3

// fixedTime writes t at 9 bytes whether zero or not (unless it needs its
// text).
func (e *encoder) fixedTime(t time.Time) error {
	if t.IsZero() {
		e.b = append(e.b, timeZeroPadded, 0, 0, 0, 0, 0, 0, 0, 0)
		return nil
	}
	return e.time(t)
}

func (e *encoder) bool(b bool) {
	if b {
		e.b = append(e.b, 1)
		return
	}
	e.b = append(e.b, 0)
}

func (d *decoder) bool() bool {
	p := d.take(1)
	return len(p) == 1 && p[0] != 0
}

// A playbook hash is the hex SHA-256 of its source: written as its 32
// bytes (hashRaw) when it is exactly that, else as text (hashText).
const (
	hashText = 0
	hashRaw  = 1
)

func (e *encoder) hash(h string) {
	if raw, err := hex.DecodeString(h); err == nil && len(raw) == sha256.Size && hex.EncodeToString(raw) == h {
		e.b = append(e.b, hashRaw)
		e.b = append(e.b, raw...)
		return
	}
	e.b = append(e.b, hashText)
	e.str(h)
}

func (d *decoder) hash() string {
	kind := d.take(1)
	switch {
	case kind == nil:
		return ""
	case kind[0] == hashRaw:
		return hex.EncodeToString(d.take(sha256.Size))
	case kind[0] == hashText:
		return d.str()
	}
	d.fail(fmt.Errorf("hash kind %d", kind[0]))
	return ""
}

// A run record is sourcedTag, the number of its source (playbook, file and
// hash; sources.go) as a uvarint, then its body (encodeRunBody): most runs
// share a few sources, and spelling the three would take a third of a
// waiting run's record.
const sourcedTag = 0x02

// encodeRunBody encodes what follows a run record's source number: r
// without its ID and source.
func encodeRunBody(r *state.Run) ([]byte, error) {
	e := &encoder{b: make([]byte, 0, 128+len(r.Snapshot))}
	e.bytes(r.Snapshot)
	if err := e.json(r.Inputs, len(r.Inputs) == 0); err != nil {
		return nil, err
	}
	if err := e.json(r.Trigger, len(r.Trigger) == 0); err != nil {
		return nil, err
	}
	e.str(string(r.Status))
	if err := e.json(r.Error, r.Error == nil); err != nil {
		return nil, err
	}
	if r.Delivery == nil {
		e.uint(0)
	} else {
		e.uint(1)
		e.str(r.Delivery.ID)
		e.int(int64(r.Delivery.Hook))
	}
	if err := e.json(r.Outputs, len(r.Outputs) == 0); err != nil {
		return nil, err
	}
	for _, s := range []string{r.ParentID, r.ParentStep, r.RetryOf, r.RetryFrom, r.ConcurrencyKey, r.Owner} {
		e.str(s)
	}
	if err := e.time(r.CreatedAt); err != nil {
		return nil, err
	}
	for _, t := range []time.Time{r.StartedAt, r.EndedAt, r.Deadline, r.WakeAt} {
		if err := e.fixedTime(t); err != nil {
			return nil, err
		}
	}
	e.bool(r.AnswerOnly)
	e.str(r.Sim)
	e.bool(r.TakeOver)
	e.str(r.QueuedOnKey)
	e.str(r.Paused)
	if r.WokenEarly { // only then: a record without it reads in the builds before it
		e.bool(true)
	}
	return e.b, nil
}

// sourcedRecord is the record of a run of source number src with body
// (encodeRunBody).
func sourcedRecord(src uint64, body []byte) []byte {
	out := make([]byte, 0, 1+binary.MaxVarintLen64+len(body))
	out = append(out, sourcedTag)
	out = binary.AppendUvarint(out, src)
	return append(out, body...)
}

// runSource is a run's source, as a run record names it by number.
type runSource struct{ playbook, file, hash string }

// sourceReader resolves a source number.
type sourceReader func(n uint64) (runSource, error)

// recordDecoder returns a decoder positioned after a run record's source
// number, and the source that number names (read through sources).
func recordDecoder(v []byte, sources sourceReader) (*decoder, runSource, error) {
	if len(v) == 0 || v[0] != sourcedTag {
		return nil, runSource{}, errors.New("not a run record")
	}
	d := &decoder{b: v[1:]}
	n := d.uint()
	if d.err != nil {
		return nil, runSource{}, d.err
	}
	src, err := sources(n)
	return d, src, err
}

// deliveryOfRecord reads a run record up to its Delivery (see
// encodeRunBody), skipping what comes before.
func deliveryOfRecord(v []byte) (id string, ok bool, err error) {
	if len(v) == 0 || v[0] != sourcedTag {
		return "", false, errors.New("not a run record")
	}
	d := &decoder{b: v[1:]}
	d.uint()         // source
	d.take(d.uint()) // Snapshot
	for range 2 {    // Inputs, Trigger
		d.take(d.uint())
	}
	d.str()          // Status
	d.take(d.uint()) // Error
	if d.uint() == 1 {
		id, ok = d.str(), true
	}
	return id, ok, d.err
}

// decodeRun decodes the record of run id, its source through sources.
func decodeRun(id string, v []byte, sources sourceReader) (*state.Run, error) {
	r := new(state.Run)
	d, src, err := recordDecoder(v, sources)
	if err != nil {
		return nil, fmt.Errorf("decode run %s: %w: %w", id, state.ErrCorrupt, err)
	}
	r.ID = id
	r.Playbook, r.File, r.Hash = src.playbook, src.file, src.hash
	r.Snapshot = d.bytes()
	d.json(&r.Inputs)
	d.json(&r.Trigger)
	r.Status = state.RunStatus(d.str())
	d.json(&r.Error)
	if d.uint() == 1 {
		r.Delivery = &state.DeliveryRef{ID: d.str(), Hook: int(d.int())}
	}
	d.json(&r.Outputs)
	for _, s := range []*string{&r.ParentID, &r.ParentStep, &r.RetryOf, &r.RetryFrom, &r.ConcurrencyKey, &r.Owner} {
		*s = d.str()
	}
	r.CreatedAt = d.time()
	r.StartedAt = d.time()
	r.EndedAt = d.time()
	r.Deadline = d.time()
	r.WakeAt = d.time()
	r.AnswerOnly = d.bool()
	r.Sim = d.str()
	r.TakeOver = d.bool()
	r.QueuedOnKey = d.str()
	if len(d.b) > 0 { // absent from the records written before it
		r.Paused = d.str()
	}
	if len(d.b) > 0 { // written only when set
		r.WokenEarly = d.bool()
	}
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("decode run %s: %w: %w", id, state.ErrCorrupt, err)
	}
	return r, nil
}

// encodeSource and decodeSource encode a source (sources.go).
func encodeSource(src runSource) []byte {
	e := newEncoder(48 + len(src.playbook) + len(src.file))
	e.str(src.playbook)
	e.str(src.file)
	e.hash(src.hash)
	return e.b
}

func decodeSource(v []byte) (runSource, error) {
	d := newDecoder(v)
	src := runSource{playbook: d.str(), file: d.str(), hash: d.hash()}
	return src, d.done()
}

// encodeAudit encodes r without its Seq (its key holds it).
func encodeAudit(r *state.AuditRecord) ([]byte, error) {
	e := newEncoder(48 + len(r.Identity) + len(r.Target) + len(r.Source))
	if err := e.time(r.Time); err != nil {
		return nil, err
	}
	for _, s := range []string{r.Identity, r.Action, r.Target, r.Result, r.Source} {
		e.str(s)
	}
	if err := e.json(r.Detail, len(r.Detail) == 0); err != nil {
		return nil, err
	}
	return e.b, nil
}

// decodeAudit decodes audit record number seq.
func decodeAudit(seq uint64, v []byte) (state.AuditRecord, error) {
	var r state.AuditRecord
	d := newDecoder(v)
	r.Seq = seq
	r.Time = d.time()
	for _, s := range []*string{&r.Identity, &r.Action, &r.Target, &r.Result, &r.Source} {
		*s = d.str()
	}
	d.json(&r.Detail)
	if err := d.done(); err != nil {
		return r, fmt.Errorf("%w: audit record %d: %v", state.ErrCorrupt, seq, err)
	}
	return r, nil
}
