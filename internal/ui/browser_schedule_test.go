package ui_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/api"
)

// browserTick fires every second, passing its slot as an input.
const browserTick = `version: 1
name: ui-tick
inputs:
  slot: {type: string, required: true}
triggers:
  - schedule: {cron: "* * * * * *", catchup: none}
    inputs: {slot: "${{ trigger.slot }}"}
steps:
  - {id: say, uses: log, with: {message: "slot ${{ inputs.slot }}"}}
`

// schedules reads GET /api/v1/schedules of a runbook serve.
func schedules(t *testing.T, base string) api.Schedule {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/api/v1/schedules", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var l api.ScheduleList
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&l))
	for _, sc := range l.Schedules {
		if sc.Playbook == "ui-tick" {
			return sc
		}
	}
	t.Fatal("no schedule of ui-tick")
	return api.Schedule{}
}

// The schedule controls and "Run again" in a real Chromium against a real
// runbook serve: a schedule is paused with a reason and its skipped slots
// show the reason; Run now starts a run; a backfill of the skipped slots,
// dry then real, lists them and starts one run each; Resume lifts the
// pause; a succeeded run runs again from its page, the new run naming the
// one it reruns.
func TestBrowserScheduleControlsAndRunAgain(t *testing.T) {
	chromium(t)
	srv := startServe(t, map[string]string{"ui-tick.yaml": browserTick})
	b := newBrowser(t, srv.url)
	b.open("/schedules")
	b.waitFor(`input[name="token"]`)
	b.do(chromedp.SetValue(chromedp.CSS("#token"), token), chromedp.SetValue(chromedp.CSS("#name"), "ops-alice"),
		chromedp.Submit(chromedp.CSS("#token")))
	b.waitFor("#sched-ui-tick-0")

	card := "#sched-ui-tick-0"
	b.do(chromedp.SetValue(chromedp.CSS(card+` .pause-form input[name="reason"]`), "change freeze"),
		chromedp.Click(chromedp.CSS(card+" .pause-form button")))
	b.waitFor(card + " [data-done]")
	assert.Contains(t, b.text(card+" [data-paused]"), "change freeze")
	var paused []api.Slot
	deadline := time.Now().Add(20 * time.Second)
	for len(paused) < 3 {
		require.True(t, time.Now().Before(deadline), "three slots skipped by the pause within 20 s")
		time.Sleep(300 * time.Millisecond)
		paused = paused[:0]
		for _, sl := range schedules(t, srv.url).Recent {
			if sl.Paused != "" {
				paused = append([]api.Slot{sl}, paused...) // oldest first
			}
		}
	}
	b.open("/schedules")
	b.waitFor(card + " [data-paused-slot]")
	assert.Contains(t, b.text(card+" [data-paused-slot]"), "skipped: paused by")
	assert.Contains(t, b.text(card+" [data-paused-slot]"), "change freeze")
	b.shot("schedules-paused")

	b.do(chromedp.Click(chromedp.CSS(card + " .run-now-form button")))
	b.waitFor(`.head-line .st-succeeded`)
	nowRun := strings.TrimPrefix(b.path(), "/runs/")
	assert.Contains(t, b.text(".facts"), "run now")

	// Backfill the skipped slots: a dry run, then for real.
	// A datetime-local input holds a whole minute without its seconds
	// (Chromium turns "…T09:00:00" into "…T09:00"), and SetValue fails
	// when the value it reads back differs: a slot on a whole minute is
	// given as the input holds it (the server reads both forms).
	local := func(slot string) string { return strings.TrimSuffix(strings.TrimSuffix(slot, "Z"), ":00") }
	from, to := local(paused[0].Slot), local(paused[len(paused)-1].Slot)
	b.open("/schedules")
	b.waitFor(card + " .backfill-form")
	b.do(chromedp.SetValue(chromedp.CSS(card+` .backfill-form input[name="from"]`), from),
		chromedp.SetValue(chromedp.CSS(card+` .backfill-form input[name="to"]`), to),
		chromedp.Click(chromedp.CSS(card+" .backfill-form button")))
	b.waitFor(card + " [data-backfill]")
	n := strconv.Itoa(len(paused))
	assert.Contains(t, b.text(card+" [data-backfill]"), "Dry run: "+n+" slots, nothing started")
	assert.Equal(t, n, b.eval(`String(document.querySelectorAll('`+card+` tr[data-outcome="would start"]').length)`))
	b.do(chromedp.SetValue(chromedp.CSS(card+` .backfill-form input[name="from"]`), from),
		chromedp.SetValue(chromedp.CSS(card+` .backfill-form input[name="to"]`), to),
		chromedp.RemoveAttribute(chromedp.CSS(card+` .backfill-form input[name="dry_run"]`), "checked"),
		chromedp.Click(chromedp.CSS(card+" .backfill-form button")))
	b.waitFor(card + ` tr[data-outcome="started"]`)
	assert.Contains(t, b.text(card+" [data-backfill]"), "Backfill: "+n+" slots, "+n+" runs started")
	b.shot("schedules-backfill")

	b.open("/schedules")
	b.waitFor(card + " .resume-form")
	b.do(chromedp.Click(chromedp.CSS(card + " .resume-form button")))
	b.waitFor(card + " [data-done]")
	assert.Contains(t, b.text(card+" [data-done]"), "resumed")
	assert.Equal(t, "0", b.eval(`String(document.querySelectorAll('`+card+` [data-paused]').length)`))

	b.open("/runs/" + nowRun)
	b.waitFor(".rerun-form")
	b.do(chromedp.Click(chromedp.CSS(".rerun-form button")))
	b.waitFor(`[data-rerun-of]`)
	b.waitFor(`.head-line .st-succeeded`)
	assert.NotEqual(t, "/runs/"+nowRun, b.path(), "a rerun is a new run")
	assert.Contains(t, b.text(".facts"), "Rerun of")
	assert.Contains(t, b.text(".facts"), nowRun)
	b.shot("run-rerun")
}
