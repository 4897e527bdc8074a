package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const scheduledPlaybook = `version: 1
name: nightly
triggers:
  - schedule: {cron: "30 2 * * *", timezone: America/New_York, overlap: queue}
  - webhook: {route: hooks/x}
  - schedule: {cron: "CRON_TZ=Asia/Seoul @daily", catchup: latest}
steps:
  - id: a
    uses: log
    with: {message: hi}
`

func TestScheduleNext(t *testing.T) {
	c := newCLI(t)
	pb := c.file("nightly.yaml", scheduledPlaybook)

	t.Run("prints each schedule's fire times in its zone, with the DST change visible", func(t *testing.T) {
		r := c.run("schedule", "next", pb, "-n", "3", "--from", "2026-03-06T12:00:00Z")
		require.Equal(t, 0, r.code, r)
		assert.Equal(t, `nightly triggers[0]: cron "30 2 * * *" in America/New_York
  2026-03-07 02:30:00 EST -0500
  2026-03-09 02:30:00 EDT -0400
  2026-03-10 02:30:00 EDT -0400

nightly triggers[2]: cron "CRON_TZ=Asia/Seoul @daily" in Asia/Seoul
  2026-03-07 00:00:00 KST +0900
  2026-03-08 00:00:00 KST +0900
  2026-03-09 00:00:00 KST +0900
`, r.stdout)
		assert.Empty(t, r.stderr)
	})
	t.Run("the fall-back day repeats a slot in the repeated hour", func(t *testing.T) {
		p := c.file("fallback.yaml", `version: 1
name: fallback
triggers:
  - schedule: {cron: "30 1 * * *", timezone: America/New_York}
steps:
  - id: a
    uses: log
    with: {message: hi}
`)
		r := c.run("schedule", "next", p, "-n", "3", "--from", "2026-10-31T12:00:00Z")
		require.Equal(t, 0, r.code, r)
		assert.Contains(t, r.stdout, "  2026-11-01 01:30:00 EDT -0400\n  2026-11-01 01:30:00 EST -0500\n  2026-11-02 01:30:00 EST -0500\n")
	})
	t.Run("--trigger and --output json select one trigger for machines", func(t *testing.T) {
		r := c.run("schedule", "next", pb, "--trigger", "0", "-n", "2", "--output", "json", "--from", "2026-03-06T12:00:00Z")
		require.Equal(t, 0, r.code, r)
		var got scheduleNext
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
		assert.Equal(t, scheduleNext{
			Playbook: "nightly", File: pb, From: "2026-03-06T12:00:00Z",
			Triggers: []scheduleNextTrig{{
				Index: 0, Cron: "30 2 * * *", Timezone: "America/New_York", Overlap: "queue", Catchup: "none",
				Next: []string{"2026-03-07T02:30:00-05:00", "2026-03-09T02:30:00-04:00"},
			}},
		}, got)
	})
	t.Run("an index that is not a schedule trigger is a usage error", func(t *testing.T) {
		r := c.run("schedule", "next", pb, "--trigger", "1")
		assert.Equal(t, 2, r.code, r)
		assert.Contains(t, r.stderr, "no schedule trigger at index 1")
	})
	t.Run("an invalid playbook prints its diagnostics and exits 2", func(t *testing.T) {
		bad := c.file("bad.yaml", `version: 1
name: bad
triggers:
  - schedule: {cron: "61 * * * *", timezone: Mars/Olympus}
steps:
  - id: a
    uses: log
    with: {message: hi}
`)
		r := c.run("schedule", "next", bad)
		assert.Equal(t, 2, r.code, r)
		assert.Empty(t, r.stdout)
		assert.Regexp(t, `(?m)^`+bad+`:4:\d+: .*cron`, r.stderr)
		assert.Regexp(t, `(?m)^`+bad+`:4:\d+: .*Mars/Olympus`, r.stderr)
		assert.Contains(t, r.stderr, "Try: ")
	})
	t.Run("a playbook without schedules says so", func(t *testing.T) {
		r := c.run("schedule", "next", c.file("hello.yaml", helloPlaybook))
		assert.Equal(t, 2, r.code, r)
		assert.Contains(t, r.stderr, "has no schedule triggers")
	})
}
