package ui

import (
	"fmt"
	"time"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/state"
)

// timelineWidth is the width of a timeline bar's viewBox: segment x and
// width are in thousandths of the run's span.
const timelineWidth = 1000

// timeline is the Gantt chart of a run: one row per step record, one
// segment per attempt, the waits between attempts and for approvals.
type timeline struct {
	Rows  []timelineRow
	Ticks []string  // labels of the equally spaced ticks, from the start
	Grid  []float64 // x of each tick after the first
	Span  string    // the whole chart's duration
}

// TickClass is the CSS class that lays the tick labels out.
func (t *timeline) TickClass() string { return fmt.Sprintf("ticks ticks-%d", len(t.Ticks)) }

// timelineItems is how many items of a for_each step the timeline draws
// a row for (and every item that failed, runs or waits); the others are
// one row that says how many.
const timelineItems = 10

type timelineRow struct {
	// Of and More: a row that stands for More items of the for_each step
	// Of, not drawn.
	Of       string
	More     int
	ID       string
	Status   string
	Duration string
	// Since is when a running step started: the page shows its duration
	// going by.
	Since    time.Time
	Segments []segment
	Markers  []marker
}

// segment is one bar of a row: an attempt (running, succeeded, failed,
// cancelled), a wait for approval or between attempts (retry-wait).
type segment struct {
	X, W  float64
	Kind  string
	Title string
}

// marker is an instant on a row: a skip, a reuse.
type marker struct {
	X     float64
	Title string
}

// tickSteps are the tick intervals a timeline picks from.
var tickSteps = []time.Duration{
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour, 48 * time.Hour, 7 * 24 * time.Hour,
}

// maxTicks is the most ticks a timeline shows (the CSS has a layout for
// each count up to it).
const maxTicks = 10

// scale maps times onto a timeline from t0 over n ticks of step.
type scale struct {
	t0    time.Time
	total time.Duration
}

func (s scale) x(t time.Time) float64 {
	if s.total <= 0 {
		return 0
	}
	v := float64(t.Sub(s.t0)) / float64(s.total) * timelineWidth
	return min(max(v, 0), timelineWidth)
}

// newScale picks a round tick interval so that the run's span fits in at
// most maxTicks ticks, and extends the chart to the last tick.
func newScale(t0, t1 time.Time) (scale, []string) {
	d := max(t1.Sub(t0), time.Millisecond)
	step := tickSteps[len(tickSteps)-1]
	for _, s := range tickSteps {
		if d <= s*maxTicks {
			step = s
			break
		}
	}
	n := int((d + step - 1) / step)
	n = min(max(n, 1), maxTicks)
	ticks := make([]string, n)
	for i := range ticks {
		ticks[i] = "+" + shortDuration(step*time.Duration(i))
	}
	return scale{t0: t0, total: step * time.Duration(n)}, ticks
}

func shortDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%gs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%gm", d.Minutes())
	}
	return fmt.Sprintf("%gh", d.Hours())
}

// buildTimeline lays out the steps of a run from its event log; a step
// whose events are not at hand is drawn from its record's times.
func buildTimeline(run *api.Run, events []state.Event, now time.Time) *timeline {
	t0 := run.CreatedAt
	if !run.StartedAt.IsZero() && (t0.IsZero() || run.StartedAt.Before(t0)) {
		t0 = run.StartedAt
	}
	t1 := run.EndedAt
	if t1.IsZero() {
		t1 = now
	}
	byStep := map[string][]state.Event{}
	for _, ev := range events {
		if ev.Step != "" {
			byStep[ev.Step] = append(byStep[ev.Step], ev)
		}
		if ev.Time.After(t1) {
			t1 = ev.Time
		}
	}
	for _, st := range run.Steps {
		if st.EndedAt.After(t1) {
			t1 = st.EndedAt
		}
	}
	sc, ticks := newScale(t0, t1)
	tl := &timeline{Ticks: ticks, Span: fmtDuration(t1.Sub(t0))}
	for i := 1; i < len(ticks); i++ {
		tl.Grid = append(tl.Grid, float64(i)*timelineWidth/float64(len(ticks)))
	}
	end := run.EndedAt
	interrupted := run.Status == state.RunInterrupted
	if interrupted && len(events) > 0 {
		end = events[len(events)-1].Time // its process stopped after its last event
	}
	items, folded := map[string]int{}, map[string]bool{}
	for _, st := range run.Steps {
		if base := baseID(st.ID); base != st.ID {
			items[base]++
			if items[base] > timelineItems && st.Status != state.StepFailed && st.Status != state.StepRunning && st.Status != state.StepWaiting {
				if !folded[base] {
					tl.Rows = append(tl.Rows, timelineRow{Of: base})
					folded[base] = true
				}
				continue
			}
		}
		row := timelineRow{ID: st.ID, Status: string(st.Status), Duration: span(now, st.StartedAt, st.EndedAt)}
		switch {
		case interrupted && st.Status == state.StepRunning:
			row.Status, row.Duration = string(state.RunInterrupted), "" // nothing runs it
		case st.Status == state.StepRunning:
			row.Since = st.StartedAt
		}
		if evs := byStep[st.ID]; len(evs) > 0 {
			row.Segments, row.Markers = segmentsOf(sc, evs, end, now)
		}
		if len(row.Segments) == 0 && !st.StartedAt.IsZero() {
			stop := st.EndedAt
			if stop.IsZero() {
				stop = now
			}
			row.Segments = []segment{newSegment(sc, st.StartedAt, stop, string(st.Status),
				fmt.Sprintf("%s · %s", st.Status, fmtDuration(stop.Sub(st.StartedAt))))}
		}
		tl.Rows = append(tl.Rows, row)
	}
	for i := range tl.Rows { // tl.Rows grew: count anew
		if r := &tl.Rows[i]; r.Of != "" {
			r.More = items[r.Of] - timelineItems
		}
	}
	return tl
}

func newSegment(sc scale, from, to time.Time, kind, title string) segment {
	x := sc.x(from)
	w := max(sc.x(to)-x, 2)
	if x+w > timelineWidth {
		x = timelineWidth - w
	}
	return segment{X: x, W: w, Kind: kind, Title: title}
}

// segmentsOf turns one step's events into bars: each attempt from its
// step.started to what ended it, the approval wait from step.waiting,
// the delay between attempts from step.retry to the next start. runEnd
// closes a bar the log left open (zero: the run goes on, close at now).
func segmentsOf(sc scale, evs []state.Event, runEnd, now time.Time) ([]segment, []marker) {
	var segs []segment
	var marks []marker
	type open struct {
		start   time.Time
		kind    string
		attempt int
	}
	var cur *open
	closeAt := func(t time.Time, kind string) {
		if cur == nil {
			return
		}
		title := fmt.Sprintf("attempt %d · %s · %s", cur.attempt, kind, fmtDuration(t.Sub(cur.start)))
		if cur.kind == "waiting" {
			title = fmt.Sprintf("waiting for approval · %s", fmtDuration(t.Sub(cur.start)))
			kind = "waiting"
		}
		if cur.kind == "retry-wait" {
			title, kind = fmt.Sprintf("delay before attempt %d · %s", cur.attempt+1, fmtDuration(t.Sub(cur.start))), "retry-wait"
		}
		segs = append(segs, newSegment(sc, cur.start, t, kind, title))
		cur = nil
	}
	for _, ev := range evs {
		switch ev.Type {
		case "step.started":
			closeAt(ev.Time, "interrupted")
			cur = &open{start: ev.Time, kind: "running", attempt: ev.Attempt}
		case "step.waiting":
			closeAt(ev.Time, "running")
			cur = &open{start: ev.Time, kind: "waiting", attempt: ev.Attempt}
		case "step.retry":
			attempt := ev.Attempt
			closeAt(ev.Time, "failed")
			cur = &open{start: ev.Time, kind: "retry-wait", attempt: attempt}
		case "step.succeeded", "step.failed", "step.cancelled":
			closeAt(ev.Time, ev.Type[len("step."):])
		case "step.skipped", "step.reused":
			marks = append(marks, marker{X: sc.x(ev.Time), Title: ev.Type[len("step."):] + ": " + ev.Message})
		}
	}
	if cur != nil {
		if runEnd.IsZero() {
			kind := cur.kind
			if kind != "waiting" && kind != "retry-wait" {
				kind = "running"
			}
			closeAt(now, kind)
		} else {
			closeAt(runEnd, "interrupted")
		}
	}
	return segs, marks
}
