package bolt_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

// TestEventsAreKeptInBlocksAndReadFromAnywhere: a run's events share
// keys (a block holds consecutive events up to about 512 bytes), and a
// read from any event, with any limit, gives exactly the events after it,
// whether the run was created with events, given them one by one or many
// at once, small or larger than a block, before and after a reopen.
func TestEventsAreKeptInBlocksAndReadFromAnywhere(t *testing.T) {
	s, path := openTemp(t, bolt.Options{NoSync: true})
	at := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	var want []state.Event
	event := func(i int) state.Event {
		ev := state.Event{Time: at.Add(time.Duration(i) * time.Millisecond), Type: "log", Step: "s", Attempt: 1, Level: "INFO",
			Message: strings.Repeat("x", i%40)}
		if i%50 == 7 {
			ev.Message = strings.Repeat("a long line ", 100) // over a block by itself
		}
		return ev
	}
	add := func(evs ...state.Event) {
		for _, ev := range evs {
			ev.Seq = uint64(len(want) + 1)
			want = append(want, ev)
		}
	}
	first := []state.Event{event(0), event(1)}
	must(t, s.CreateRun(ctx, &state.Run{ID: "r1", Playbook: "pb", CreatedAt: at}, first...))
	add(first...)
	for i := 2; i < 300; {
		n := 1 + i%9 // batches of 1 to 9 events
		var batch []state.Event
		for j := range n {
			batch = append(batch, event(i+j))
		}
		must(t, s.AppendEvents(ctx, "r1", batch...))
		add(batch...)
		i += n
	}
	check := func(when string) {
		t.Helper()
		for after := 0; after <= len(want)+1; after++ {
			for _, limit := range []int{0, 1, 7} {
				got, err := s.Events(ctx, "r1", uint64(after), limit)
				must(t, err)
				exp := want[min(after, len(want)):]
				if limit > 0 && len(exp) > limit {
					exp = exp[:limit]
				}
				if len(got) != len(exp) || (len(exp) > 0 && !reflect.DeepEqual(got, exp)) {
					t.Fatalf("%s: events after %d (limit %d): got %d events from %v, want %d from %d", when, after, limit, len(got), firstSeq(got), len(exp), after+1)
				}
			}
		}
	}
	check("open")
	u, err := s.Usage(ctx)
	must(t, err)
	for _, p := range u.Parts {
		if p.Name == "rundata/E" && (p.Keys < 10 || p.Keys > len(want)/4) {
			t.Errorf("%d events in %d keys, want a key per few events", len(want), p.Keys)
		}
		if p.Name == "rundata/e" {
			t.Errorf("%d events kept one per key", p.Keys)
		}
	}
	must(t, s.Close())
	s, err = bolt.Open(path, bolt.Options{ReadOnly: true})
	must(t, err)
	defer s.Close()
	check("reopened read-only")
}

func firstSeq(evs []state.Event) any {
	if len(evs) == 0 {
		return "none"
	}
	return evs[0].Seq
}
