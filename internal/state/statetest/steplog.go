package statetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// OutputStore is a store with a step output area.
type OutputStore interface {
	state.Store
	state.StepOutput
}

// RunStepOutput runs the contract of state.StepOutput against stores from
// open, one fresh and empty store per test.
func RunStepOutput(t *testing.T, open func(t *testing.T) OutputStore) {
	t.Helper()
	t.Run("lines get increasing sequence numbers across chunks and read back after any of them", func(t *testing.T) { testOutputSeq(t, open(t)) })
	t.Run("a step's lines are read alone, with its for_each items", func(t *testing.T) { testOutputStep(t, open(t)) })
	t.Run("output of an unknown run is refused, a run without output reads empty", func(t *testing.T) { testOutputNoRun(t, open(t)) })
	t.Run("lines a step record carries are appended by its write, after the run's last ones", func(t *testing.T) { testOutputPrinted(t, open(t)) })
	t.Run("output is kept apart per run and deleted with its run", func(t *testing.T) { testOutputDelete(t, open(t)) })
}

func lines(step string, n int, prefix string) []state.OutputLine {
	out := make([]state.OutputLine, n)
	for i := range out {
		out[i] = state.OutputLine{Step: step, Attempt: 1, Stream: state.StreamStdout, Text: fmt.Sprintf("%s %d", prefix, i)}
	}
	return out
}

func texts(ls []state.OutputLine) []string {
	out := []string{}
	for _, l := range ls {
		out = append(out, l.Text)
	}
	return out
}

func outSeqs(ls []state.OutputLine) []uint64 {
	out := []uint64{}
	for _, l := range ls {
		out = append(out, l.Seq)
	}
	return out
}

func testOutputSeq(t *testing.T, s OutputStore) {
	create(t, s, newRun("r1", "pb", at(0)))
	a := lines("a", 3, "first")
	a[0].Time = at(time.Second)
	a[1].Stream = state.StreamStderr
	ok(t, s.AppendOutput(ctx, "r1", a))
	same(t, outSeqs(a), []uint64{1, 2, 3})
	b := lines("a", 2, "second")
	b[1].Stream, b[1].Attempt = "custom", 2
	ok(t, s.AppendOutput(ctx, "r1", b))
	same(t, outSeqs(b), []uint64{4, 5})
	ok(t, s.AppendOutput(ctx, "r1", nil))

	all, err := s.Output(ctx, "r1", state.OutputFilter{})
	ok(t, err)
	same(t, texts(all), []string{"first 0", "first 1", "first 2", "second 0", "second 1"})
	same(t, outSeqs(all), []uint64{1, 2, 3, 4, 5})
	same(t, all[1].Stream, state.StreamStderr)
	same(t, all[4].Stream, "custom")
	same(t, all[4].Attempt, 2)
	same(t, all[3].Attempt, 1)
	same(t, all[0].Attempt, 1)
	if !all[0].Time.Equal(at(time.Second)) {
		t.Fatalf("a line's time is not kept: %v", all[0].Time)
	}
	if all[2].Time.IsZero() {
		t.Fatal("a line without a time did not get one")
	}
	for after := uint64(0); after <= 5; after++ {
		got, err := s.Output(ctx, "r1", state.OutputFilter{After: after})
		ok(t, err)
		want := []uint64{}
		for n := after + 1; n <= 5; n++ {
			want = append(want, n)
		}
		same(t, outSeqs(got), want)
	}
	got, err := s.Output(ctx, "r1", state.OutputFilter{After: 1, Limit: 3})
	ok(t, err)
	same(t, outSeqs(got), []uint64{2, 3, 4})
	got, err = s.Output(ctx, "r1", state.OutputFilter{After: 9})
	ok(t, err)
	same(t, len(got), 0)
}

func testOutputStep(t *testing.T, s OutputStore) {
	create(t, s, newRun("r1", "pb", at(0)))
	mixed := append(append(lines("build", 2, "b"), lines("deploy[0]", 1, "d0")...), lines("deploy[1]", 1, "d1")...)
	mixed = append(mixed, lines("deployer", 1, "other")...)
	ok(t, s.AppendOutput(ctx, "r1", mixed))
	ok(t, s.AppendOutput(ctx, "r1", lines("build", 1, "late")))

	got, err := s.Output(ctx, "r1", state.OutputFilter{Step: "build"})
	ok(t, err)
	same(t, texts(got), []string{"b 0", "b 1", "late 0"})
	got, err = s.Output(ctx, "r1", state.OutputFilter{Step: "deploy"})
	ok(t, err)
	same(t, texts(got), []string{"d0 0", "d1 0"})
	got, err = s.Output(ctx, "r1", state.OutputFilter{Step: "deploy[1]"})
	ok(t, err)
	same(t, texts(got), []string{"d1 0"})
	got, err = s.Output(ctx, "r1", state.OutputFilter{Step: "build", After: 2})
	ok(t, err)
	same(t, texts(got), []string{"late 0"})
}

func testOutputNoRun(t *testing.T, s OutputStore) {
	errIs(t, s.AppendOutput(ctx, "nope", lines("a", 1, "x")), state.ErrNotFound)
	_, err := s.Output(ctx, "nope", state.OutputFilter{})
	errIs(t, err, state.ErrNotFound)
	create(t, s, newRun("r1", "pb", at(0)))
	got, err := s.Output(ctx, "r1", state.OutputFilter{})
	ok(t, err)
	same(t, len(got), 0)
}

func testOutputDelete(t *testing.T, s OutputStore) {
	r1 := newRun("r1", "pb", at(0))
	create(t, s, r1)
	create(t, s, newRun("r2", "pb", at(time.Second)))
	ok(t, s.AppendOutput(ctx, "r1", lines("a", 2, "one")))
	ok(t, s.AppendOutput(ctx, "r2", lines("a", 1, "two")))
	got, err := s.Output(ctx, "r2", state.OutputFilter{})
	ok(t, err)
	same(t, texts(got), []string{"two 0"})
	same(t, outSeqs(got), []uint64{1})

	r1.Status, r1.EndedAt = state.RunSucceeded, at(time.Minute)
	ok(t, s.SaveRun(ctx, r1))
	ok(t, s.DeleteRun(ctx, "r1"))
	_, err = s.Output(ctx, "r1", state.OutputFilter{})
	errIs(t, err, state.ErrNotFound)
	// A new run under the same ID starts without the old output.
	create(t, s, newRun("r1", "pb", at(2*time.Minute)))
	got, err = s.Output(ctx, "r1", state.OutputFilter{})
	ok(t, err)
	same(t, len(got), 0)
	ok(t, s.AppendOutput(ctx, "r1", lines("a", 1, "again")))
	got, err = s.Output(ctx, "r1", state.OutputFilter{})
	ok(t, err)
	same(t, outSeqs(got), []uint64{1})
	got, err = s.Output(ctx, "r2", state.OutputFilter{})
	ok(t, err)
	same(t, texts(got), []string{"two 0"})
}

func testOutputPrinted(t *testing.T, s OutputStore) {
	r := newRun("r1", "pb", at(0))
	create(t, s, r)
	ok(t, s.AppendOutput(ctx, "r1", lines("a", 2, "batch")))
	a := &state.StepRecord{RunID: "r1", ID: "a", Status: state.StepSucceeded, Printed: lines("a", 2, "end")}
	a.Printed[0].Time = at(time.Second)
	b := &state.StepRecord{RunID: "r1", ID: "b", Status: state.StepRunning, Printed: lines("b", 1, "b")}
	ok(t, s.SaveSteps(ctx, []*state.StepRecord{a, b}, state.Event{Type: "step.succeeded", Step: "a"}))
	ok(t, s.SaveStep(ctx, &state.StepRecord{RunID: "r1", ID: "b", Status: state.StepRunning, Printed: lines("b", 1, "again")}))
	r.Status = state.RunSucceeded
	ok(t, s.SaveRunSteps(ctx, r, []*state.StepRecord{{RunID: "r1", ID: "b", Status: state.StepSucceeded, Printed: lines("b", 1, "last")}}))
	ok(t, s.AppendOutput(ctx, "r1", lines("c", 1, "after")))

	all, err := s.Output(ctx, "r1", state.OutputFilter{})
	ok(t, err)
	same(t, texts(all), []string{"batch 0", "batch 1", "end 0", "end 1", "b 0", "again 0", "last 0", "after 0"})
	same(t, outSeqs(all), []uint64{1, 2, 3, 4, 5, 6, 7, 8})
	if !all[2].Time.Equal(at(time.Second)) || all[3].Time.IsZero() {
		t.Fatalf("times of printed lines: %v, %v; want %v and one set by the store", all[2].Time, all[3].Time, at(time.Second))
	}
	got, err := s.Output(ctx, "r1", state.OutputFilter{Step: "b"})
	ok(t, err)
	same(t, texts(got), []string{"b 0", "again 0", "last 0"})
	steps, err := s.Steps(ctx, "r1")
	ok(t, err)
	for _, rec := range steps {
		if rec.Printed != nil {
			t.Fatalf("step %s reads back with its printed lines: they are not part of the record", rec.ID)
		}
	}

	// A write refused writes none of its lines.
	errIs(t, s.SaveSteps(ctx, []*state.StepRecord{{RunID: "ghost", ID: "a", Printed: lines("a", 1, "x")}}), state.ErrNotFound)
	_, err = s.Output(ctx, "ghost", state.OutputFilter{})
	errIs(t, err, state.ErrNotFound)
}
