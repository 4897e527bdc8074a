package postgres

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
)

// TestRecordsAreWrittenAsJSONMarshalWritesThem: a run, a step record and
// an event are written byte for byte as json.Marshal writes them, with
// every field set (so a field added to the type and not to its encoder
// fails here), with none, and with random halves of them; and a time
// JSON cannot hold fails as it fails json.Marshal.
func TestRecordsAreWrittenAsJSONMarshalWritesThem(t *testing.T) {
	encoders := map[string]struct {
		typ    reflect.Type
		encode func(v any) ([]byte, error)
	}{
		"run":         {reflect.TypeFor[state.Run](), func(v any) ([]byte, error) { return appendRun([]byte("x"), v.(*state.Run)) }},
		"step record": {reflect.TypeFor[state.StepRecord](), func(v any) ([]byte, error) { return appendStep([]byte("x"), v.(*state.StepRecord)) }},
		"event":       {reflect.TypeFor[state.Event](), func(v any) ([]byte, error) { return appendEvent([]byte("x"), v.(*state.Event)) }},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for name, enc := range encoders {
		check := func(what string, v reflect.Value) {
			t.Helper()
			want, err := json.Marshal(v.Interface())
			require.NoError(t, err)
			got, err := enc.encode(v.Interface())
			require.NoError(t, err, "%s, %s", name, what)
			assert.Equal(t, "x"+string(want), string(got), "%s, %s", name, what)
		}
		check("no field set", reflect.New(enc.typ))
		all := reflect.New(enc.typ)
		fill(all.Elem(), func() bool { return true }, 1)
		check("every field set", all)
		for i := range 200 {
			v := reflect.New(enc.typ)
			fill(v.Elem(), func() bool { return r.IntN(2) == 0 }, i)
			check(fmt.Sprintf("random fields, %d", i), v)
		}
	}

	past := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	for name, v := range map[string]any{
		"run":         &state.Run{ID: "r", CreatedAt: past},
		"step record": &state.StepRecord{RunID: "r", ID: "s", EndedAt: past},
		"event":       &state.Event{Type: "log", Time: past},
	} {
		_, want := json.Marshal(v)
		require.Error(t, want, name)
		_, err := encoders[name].encode(v)
		assert.Error(t, err, "%s: a year JSON cannot hold", name)
	}
}

// fill sets each exported field of struct v for which set says so to a
// value that is not zero and that JSON escapes or formats with care,
// going into structs, pointers, maps and slices.
func fill(v reflect.Value, set func() bool, seed int) {
	for i := range v.NumField() {
		f := v.Field(i)
		if !v.Type().Field(i).IsExported() || !set() {
			continue
		}
		fillValue(f, set, seed+i)
	}
}

func fillValue(f reflect.Value, set func() bool, n int) {
	switch {
	case f.Type() == reflect.TypeFor[time.Time]():
		zone := time.FixedZone("x", 2*3600+30*60)
		f.Set(reflect.ValueOf(time.Date(2026, 12, 2, 16, 30, n%60, 123456789-n, zone)))
		return
	case f.Type() == reflect.TypeFor[map[string]any]():
		f.Set(reflect.ValueOf(map[string]any{"n": n, "s": "<b>&\u2028\"q\"", "list": []any{1.5, true, nil}, "nested": map[string]any{"z": "é", "a": int64(-n)}}))
		return
	}
	switch f.Kind() {
	case reflect.String:
		f.SetString(fmt.Sprintf("v%d <&> \"q\" \\ \n é", n))
	case reflect.Int, reflect.Int64, reflect.Int32:
		f.SetInt(int64(n + 1))
	case reflect.Uint64, reflect.Uint, reflect.Uint32:
		f.SetUint(uint64(n + 1))
	case reflect.Bool:
		f.SetBool(true)
	case reflect.Slice:
		if f.Type().Elem().Kind() == reflect.Uint8 {
			f.SetBytes([]byte{0, 0xff, byte(n), '<'})
			return
		}
		s := reflect.MakeSlice(f.Type(), 1, 1)
		fillValue(s.Index(0), set, n)
		f.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(f.Type())
		k := reflect.New(f.Type().Key()).Elem()
		fillValue(k, set, n)
		e := reflect.New(f.Type().Elem()).Elem()
		fillValue(e, set, n)
		m.SetMapIndex(k, e)
		f.Set(m)
	case reflect.Pointer:
		p := reflect.New(f.Type().Elem())
		fillValue(p.Elem(), set, n)
		f.Set(p)
	case reflect.Struct:
		fill(f, set, n)
	default:
		panic("fill: a field of kind " + f.Kind().String())
	}
}

// BenchmarkALogRunsRecords encodes what a `log` run served from a webhook
// writes: its record twice (created, ended), its step's record and six
// events; by the store's encoders and by json.Marshal, for the ratio.
func BenchmarkALogRunsRecords(b *testing.B) {
	at := time.Date(2026, 12, 2, 16, 30, 0, 123456789, time.UTC)
	run := &state.Run{ID: "20261202T163000-3f9c2a", Playbook: "log", Hash: "4302ceca9e900ab9f41b770dddaa9e3787435d0fc9376d32ba8cbb9940abd996",
		Status: state.RunSucceeded, Owner: "vm/22874@1341113", CreatedAt: at, StartedAt: at, EndedAt: at,
		Trigger:  map[string]any{"type": "webhook", "route": "/hooks/log", "event": "message", "delivery": "d-123", "key": "k-123"},
		Delivery: &state.DeliveryRef{ID: "d-123", Hook: -1}, Inputs: map[string]any{"message": "hello"}}
	step := &state.StepRecord{RunID: run.ID, ID: "say", Status: state.StepSucceeded, Attempts: 1, StartedAt: at, EndedAt: at,
		Outputs: map[string]any{"message": "hello"}}
	events := []state.Event{
		{Time: at, Type: "run.created", Message: "run created"},
		{Time: at, Type: "run.started", Message: "run started"},
		{Time: at, Type: "step.started", Step: "say", Attempt: 1, Message: "step say started"},
		{Time: at, Type: "log", Step: "say", Level: "info", Message: "hello"},
		{Time: at, Type: "step.succeeded", Step: "say", Attempt: 1, Message: "step say succeeded", Data: map[string]any{"duration_ms": int64(0)}},
		{Time: at, Type: "run.succeeded", Message: "run succeeded", Data: map[string]any{"duration_ms": int64(1)}},
	}
	s := &Store{now: time.Now}
	b.Run("the store's encoders", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for range 2 {
				if _, err := encodeRun(run); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := encodeSteps([]*state.StepRecord{step}, at); err != nil {
				b.Fatal(err)
			}
			if _, err := s.encodeEvents(events); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for range 2 {
				rec := *run
				rec.Snapshot = nil
				if _, err := json.Marshal(&rec); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := json.Marshal(step); err != nil {
				b.Fatal(err)
			}
			for _, ev := range events {
				if _, err := json.Marshal(ev); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
