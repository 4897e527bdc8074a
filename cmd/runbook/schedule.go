package main

import (
	"context"
	"fmt"
	"time"

	"github.com/runbook/runbook/internal/trigger"
)

var scheduleVerb = &verb{
	name:    "schedule",
	summary: "show, pause, resume, run now and backfill a playbook's schedules",
	run:     cmdSchedule,
}

func scheduleSubVerbs() []subVerb {
	return []subVerb{
		{"next", "print the next fire times of a playbook's schedules", cmdScheduleNext},
		{"status", "show the schedules runbook serve fires, their pauses and recent slots", cmdScheduleStatus},
		{"pause", "pause a playbook's schedules (or one trigger), with a reason", cmdSchedulePause},
		{"resume", "resume paused schedules; missed slots follow the catchup policy", cmdScheduleResume},
		{"run", "start a run of a schedule now, with the inputs its trigger sets", cmdScheduleRun},
		{"backfill", "start one run per slot between two times", cmdScheduleBackfill},
	}
}

func cmdSchedule(ctx context.Context, a *app, args []string) error {
	return dispatchSub(ctx, a, "schedule", "", scheduleSubVerbs(), args)
}

// slotLayout shows a fire time with its zone abbreviation and offset, so a
// daylight-saving change is visible.
const slotLayout = "2006-01-02 15:04:05 MST -0700"

// scheduleNext is the JSON form of `runbook schedule next`.
type scheduleNext struct {
	Playbook string             `json:"playbook"`
	File     string             `json:"file"`
	From     string             `json:"from"`
	Triggers []scheduleNextTrig `json:"triggers"`
}

type scheduleNextTrig struct {
	Index    int      `json:"index"`
	Cron     string   `json:"cron"`
	Timezone string   `json:"timezone"`
	Overlap  string   `json:"overlap"`
	Catchup  string   `json:"catchup"`
	Next     []string `json:"next"` // RFC 3339 in the trigger's zone
}

func cmdScheduleNext(_ context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name:    "schedule next",
		usage:   "FILE [-n 5] [--trigger i] [--from TIME] [--output json]",
		summary: "Print the next fire times of each schedule trigger of a playbook.",
		details: `Times are shown in the trigger's zone (timezone:, or a CRON_TZ= prefix; UTC
otherwise) with the zone abbreviation and UTC offset, so daylight-saving
changes are visible: a slot that does not exist on the spring-forward day is
skipped, and one in the repeated hour of the fall-back day fires twice.`,
	})
	n := fs.Int("n", 5, "how many fire times per trigger")
	only := fs.Int("trigger", -1, "only the trigger at this `index` of triggers:")
	fromFlag := fs.String("from", "", "list fire times after this RFC 3339 `time` (default now)")
	out := addOutputFlag(fs, "text")
	pos, err := parsePositional(fs, args, 1, 1, "the playbook FILE")
	if err != nil {
		return err
	}
	if *n < 1 {
		return usageErrorf(fs.Name(), "-n must be at least 1 (got %d)", *n)
	}
	from := time.Now()
	if *fromFlag != "" {
		if from, err = time.Parse(time.RFC3339, *fromFlag); err != nil {
			return usageErrorf(fs.Name(), "--from: want an RFC 3339 time like 2026-03-07T12:00:00Z, got %q", *fromFlag)
		}
	}
	pb, err := a.load(pos[0])
	if err != nil {
		return err
	}
	res := scheduleNext{Playbook: pb.Name, File: pos[0], From: from.Format(time.RFC3339), Triggers: []scheduleNextTrig{}}
	if *only < -1 || *only >= len(pb.Triggers) || (*only >= 0 && pb.Triggers[*only].Schedule == nil) {
		return usageErrorf(fs.Name(), "%s has no schedule trigger at index %d", pos[0], *only)
	}
	var shown [][]time.Time
	for i, t := range pb.Triggers {
		if t.Schedule == nil || (*only >= 0 && i != *only) {
			continue
		}
		slots, err := trigger.NextSlots(t.Schedule, from, *n)
		if err != nil {
			return withHint(err, "runbook validate "+pos[0])
		}
		tr := scheduleNextTrig{Index: i, Cron: t.Schedule.Cron, Overlap: t.Schedule.Overlap, Catchup: t.Schedule.Catchup, Next: []string{}}
		if len(slots) > 0 {
			tr.Timezone = slots[0].Location().String()
		}
		for _, s := range slots {
			tr.Next = append(tr.Next, s.Format(time.RFC3339))
		}
		res.Triggers = append(res.Triggers, tr)
		shown = append(shown, slots)
	}
	if len(res.Triggers) == 0 {
		return &exitError{code: 2, err: fmt.Errorf("%s has no schedule triggers", pos[0]), hint: "add triggers: [{schedule: {cron: \"0 3 * * *\", timezone: UTC}}] to the playbook"}
	}
	if out.json {
		return writeJSON(a.stdout, res)
	}
	for i, tr := range res.Triggers {
		if i > 0 {
			fmt.Fprintln(a.stdout)
		}
		fmt.Fprintf(a.stdout, "%s triggers[%d]: cron %q in %s\n", pb.Name, tr.Index, tr.Cron, tr.Timezone)
		if len(shown[i]) == 0 {
			fmt.Fprintln(a.stdout, "  never fires")
		}
		for _, s := range shown[i] {
			fmt.Fprintf(a.stdout, "  %s\n", s.Format(slotLayout))
		}
	}
	return nil
}
