package ui_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// browserEach resizes each cluster of its list, printing a few lines per
// item (a cluster named broken fails), and has an on_failure step that a
// run that succeeds leaves unused.
const browserEach = `version: 1
name: ui-each
description: Resizes each cluster of a list.
inputs:
  clusters: {type: list, default: [alpha, beta]}
steps:
  - id: plan
    uses: log
    with: {message: "resizing ${{ inputs.clusters }}"}
  - id: resize
    uses: shell
    for_each: ${{ inputs.clusters }}
    with: {command: 'echo "resize ${{ item }}"; echo "drained ${{ item }}"; echo "done ${{ item }}"; test "${{ item }}" != broken'}
  - id: report
    uses: log
    with: {message: "resized"}
on_failure:
  - id: alert
    uses: log
    with: {message: "resize failed"}
`

// startByAPI starts a run of playbook through the API and returns its ID.
func startByAPI(t *testing.T, base, playbook string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/api/v1/playbooks/"+playbook+"/runs", strings.NewReader(`{}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	var run struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&run))
	return run.ID
}

// signIn signs the browser in with the server token under name.
func (b *browser) signIn(name string) {
	b.t.Helper()
	b.open("/runs")
	b.waitFor(`input[name="token"]`)
	b.do(chromedp.SetValue(chromedp.CSS("#token"), token), chromedp.SetValue(chromedp.CSS("#name"), name),
		chromedp.Submit(chromedp.CSS("#token")))
	b.waitFor("table.list")
}

// height is the page's height in CSS pixels.
func (b *browser) height() int {
	b.t.Helper()
	n, err := strconv.Atoi(b.eval(`String(document.documentElement.scrollHeight)`))
	require.NoError(b.t, err)
	return n
}

// count is how many elements match sel.
func (b *browser) count(sel string) int {
	b.t.Helper()
	js, err := json.Marshal(sel)
	require.NoError(b.t, err)
	n, err := strconv.Atoi(b.eval(`String(document.querySelectorAll(` + string(js) + `).length)`))
	require.NoError(b.t, err)
	return n
}

// startEach starts ui-each from its form with clusters (JSON; empty: the
// default) and waits for the run to end with status.
func (b *browser) startEach(clusters, status string) string {
	b.t.Helper()
	b.open("/playbooks/ui-each")
	b.waitFor("#start-form")
	if clusters != "" {
		b.do(chromedp.SetValue(chromedp.CSS("#f-clusters"), clusters))
	}
	b.do(chromedp.Click(chromedp.CSS("#start-form button.primary")))
	b.waitFor(`.head-line .st-` + status)
	return strings.TrimPrefix(b.path(), "/runs/")
}

// A run page stays usable when a run is long: a finished step's output
// is folded (a failed one's is not), a for_each step's items come a page
// at a time, the graph says each step's type, count and duration; and
// the run says who started it, skips the on_failure steps it did not
// need, and the runs list leaves the first screen of a phone to the runs.
func TestBrowserRunPagesStayShort(t *testing.T) {
	chromium(t)
	srv := startServe(t, map[string]string{"ui-each.yaml": browserEach})
	b := newBrowser(t, srv.url)
	b.signIn("ops-alice")
	var twoItems string

	t.Run("a two-item for_each run that succeeded folds its steps' output", func(t *testing.T) {
		b.t = t
		twoItems = b.startEach("", "succeeded")
		h := b.height()
		t.Logf("a two-item for_each run that succeeded: page %d px high at 1280 px (3,433 px before the outputs were folded)", h)
		assert.Less(t, h, 2000)
		assert.Equal(t, "false", b.eval(`String(document.querySelector("#step-resize\\[0\\] details.step-body").open)`))
		assert.Contains(t, b.eval(`document.querySelector("#output-resize\\[1\\]").textContent`), "drained beta", "folded, not dropped")
		assert.Contains(t, b.text("#step-resize [data-items]"), "2/2 items done")
		b.shot("run-for-each")
	})

	t.Run("it names who started it, not the shared token", func(t *testing.T) {
		b.t = t
		facts := b.text(".facts")
		assert.Contains(t, facts, "ops-alice")
		assert.NotContains(t, facts, "server-token")
	})

	t.Run("its unused on_failure step is skipped, not pending", func(t *testing.T) {
		b.t = t
		alert := b.text("#step-alert")
		assert.Contains(t, alert, "skipped")
		assert.Contains(t, alert, "on_failure steps run only when the run fails")
		assert.NotContains(t, alert, "pending")
	})

	t.Run("the graph shows each step's type, for_each count and duration", func(t *testing.T) {
		b.t = t
		sub := b.eval(`Array.from(document.querySelectorAll("#graph [data-node-sub]")).map(function (e) { return e.textContent }).join("\n")`)
		assert.Regexp(t, `(?m)^shell · 2/2 · [0-9.]+s$`, sub)
		assert.Regexp(t, `(?m)^log · [0-9.]+s$`, sub)
	})

	t.Run("a failed item's output stays unfolded", func(t *testing.T) {
		b.t = t
		b.startEach(`["alpha", "broken"]`, "failed")
		assert.Equal(t, "true", b.eval(`String(document.querySelector("#step-resize\\[1\\] details.step-body").open)`))
		assert.Equal(t, "false", b.eval(`String(document.querySelector("#step-resize\\[0\\] details.step-body").open)`))
		assert.Contains(t, b.text("#output-resize\\[1\\]"), "drained broken")
		assert.Contains(t, b.text("#step-alert"), "succeeded", "on_failure ran")
	})

	t.Run("fifty items come twenty at a time", func(t *testing.T) {
		b.t = t
		var names []string
		for i := range 50 {
			names = append(names, fmt.Sprintf("c%02d", i))
		}
		list, err := json.Marshal(names)
		require.NoError(t, err)
		id := b.startEach(string(list), "succeeded")
		assert.Equal(t, 20, b.count("#step-resize .items > .step"))
		assert.Contains(t, b.text("#step-resize [data-items]"), "50/50 items done")
		assert.Contains(t, b.text("#step-resize .items-head"), "Items 1–20 of 50")
		h := b.height()
		t.Logf("a fifty-item for_each run that succeeded: page %d px high at 1280 px", h)
		assert.Less(t, h, 4000)
		b.shot("run-for-each-long")
		b.do(chromedp.Click(chromedp.CSS(`#step-resize .pager a[rel="next"]`)))
		b.waitFor(`#step-resize\[20\]`)
		assert.Equal(t, "/runs/"+id+"?page.resize=2", b.path()[:len("/runs/"+id+"?page.resize=2")])
		assert.Contains(t, b.text("#step-resize .items-head"), "Items 21–40 of 50")
		assert.Equal(t, 0, b.count(`#step-resize\[0\]`))
	})

	t.Run("a search shows the lines and steps that hold it, unfolded", func(t *testing.T) {
		b.t = t
		b.open("/runs/" + twoItems)
		b.waitFor("#log-q")
		b.do(chromedp.SetValue(chromedp.CSS("#log-q"), "DRAINED beta"), chromedp.Submit(chromedp.CSS("#log-q")))
		b.waitFor("[data-matches]")
		assert.Contains(t, b.text("[data-matches]"), `1 lines and events hold “DRAINED beta”`)
		assert.Equal(t, 1, b.count("#steps section[data-step] .items > .step"), "one item holds it")
		b.waitFor(`#output-resize\[1\]`)
		assert.Equal(t, "drained beta", strings.TrimSpace(b.text(`#output-resize\[1\]`)), "its line, and only it, shown")
		assert.Equal(t, 0, b.count(`#step-plan`), "a step that does not hold it is not shown")
		assert.Contains(t, b.path(), "q=DRAINED+beta")
		b.shot("run-search")
	})

	t.Run("the playbooks page shows each playbook's last runs, and the history page a grid of them", func(t *testing.T) {
		b.t = t
		b.open("/playbooks")
		b.waitFor(`tr[data-href="/playbooks/ui-each"] [data-cell]`)
		row := `tr[data-href="/playbooks/ui-each"]`
		assert.Equal(t, 3, b.count(row+" [data-cell]"), "its three runs so far")
		assert.Equal(t, 1, b.count(row+" [data-cell].st-failed"))
		title := b.eval(`document.querySelector('` + row + ` [data-cell]').title`)
		assert.Regexp(t, `^\S+ · succeeded · [0-9.]+s · created 20`, title, "the newest run, its status and duration on hover")
		assert.Equal(t, 0, b.count(`tr[data-href="/playbooks/ui-slow"] [data-cell]`), "a playbook never run has none")
		b.open("/history")
		b.waitFor(`#history [data-cell]`)
		assert.Equal(t, 3, b.count(`#history `+row+` [data-cell]`))
		assert.Contains(t, b.text("#history"), "never run")
		b.shot("history")
		href := b.eval(`document.querySelector('#history ` + row + ` [data-cell].st-failed').getAttribute("href")`)
		b.do(chromedp.Click(chromedp.CSS(`#history ` + row + ` [data-cell].st-failed`)))
		b.waitFor(`.head-line .st-failed`)
		assert.Equal(t, href, b.path())
	})

	t.Run("a refusal's ✗ is on the line of its message", func(t *testing.T) {
		b.t = t
		b.open("/playbooks/ui-demo")
		b.waitFor("#start-form")
		b.do(chromedp.SetValue(chromedp.CSS("#f-cluster"), "demo-three"), chromedp.Click(chromedp.CSS("#start-form button.primary")))
		b.waitFor("#approval form")
		b.do(chromedp.SetValue(chromedp.CSS("#f-window"), "soon"), chromedp.Click(chromedp.CSS(`#approval button[value="approve"]`)))
		b.waitFor("#approval .form-error")
		gap := b.eval(`(function () {
			var box = document.querySelector("#approval .form-error");
			var x = box.querySelector("[aria-hidden]"), p = box.querySelector("p");
			return String(Math.abs(x.getBoundingClientRect().top - p.getBoundingClientRect().top));
		})()`)
		px, err := strconv.ParseFloat(gap, 64)
		require.NoError(t, err)
		assert.Less(t, px, 8.0, "the ✗ and the first line of the message are at the same height (a line is 20 px)")
		b.shot("approval-refused-inline")
	})

	t.Run("a playbook's page pauses, resumes and runs now its schedule", func(t *testing.T) {
		b.t = t
		b.open("/playbooks/ui-slow")
		b.waitFor("#trigger-0 .pause-form")
		b.do(chromedp.SetValue(chromedp.CSS(`#trigger-0 .pause-form input[name="reason"]`), "change freeze"),
			chromedp.Click(chromedp.CSS("#trigger-0 .pause-form button")))
		b.waitFor("[data-done]")
		assert.Equal(t, "/playbooks/ui-slow", strings.SplitN(b.path(), "?", 2)[0], "back on the playbook's page")
		assert.Contains(t, b.text("[data-done]"), "paused")
		paused := b.text("#trigger-0 [data-paused]")
		assert.Contains(t, paused, "change freeze")
		assert.Contains(t, paused, "ops-alice")
		b.shot("playbook-schedule-paused")
		b.do(chromedp.Click(chromedp.CSS("#trigger-0 .resume-form button")))
		b.waitFor("#trigger-0 .pause-form")
		assert.Contains(t, b.text("[data-done]"), "resumed")
		assert.Equal(t, 0, b.count("#trigger-0 [data-paused]"))
		b.do(chromedp.Click(chromedp.CSS("#trigger-0 .run-now-form button")))
		b.waitFor("#run")
		assert.Contains(t, b.text(".facts"), "run now")
		assert.Contains(t, b.text(".facts"), "ops-alice")
	})

	t.Run("the runs list and the playbooks page follow the server's events instead of polling", func(t *testing.T) {
		b.t = t
		// reads counts the page's own reads of the list by script, as the
		// browser's resource timing records them.
		reads := func() int {
			n, err := strconv.Atoi(b.eval(`String(performance.getEntriesByType("resource").filter(function (e) {
				return e.initiatorType === "fetch" && new URL(e.name).pathname === "/runs" }).length)`))
			require.NoError(t, err)
			return n
		}
		b.open("/runs")
		b.waitFor("table.list tbody tr")
		b.eval(`window.__sameDocument = "yes"`)
		// Idle, a 2 s poll would have read the page twice in 5 s; the
		// stream says nothing and nothing is read.
		time.Sleep(5 * time.Second)
		assert.Equal(t, 0, reads(), "no read of the list while nothing changes")
		id := startByAPI(t, srv.url, "ui-each")
		b.waitFor(`tr[data-href="/runs/` + id + `"] .st-succeeded`)
		assert.Equal(t, "yes", b.eval(`window.__sameDocument || ""`), "the list updated itself")
		n := reads()
		assert.GreaterOrEqual(t, n, 1)
		assert.LessOrEqual(t, n, 4, "a run's events make a refresh or two, not one per event")

		b.open("/playbooks")
		b.waitFor(`html[data-list-live="stream"] tr[data-href="/playbooks/ui-each"]`) // its stream is open
		before := b.count(`tr[data-href="/playbooks/ui-each"] [data-cell]`)
		id = startByAPI(t, srv.url, "ui-each")
		b.waitFor(`tr[data-href="/playbooks/ui-each"] a[href="/runs/` + id + `"].st-succeeded`)
		assert.Equal(t, before+1, b.count(`tr[data-href="/playbooks/ui-each"] [data-cell]`))
	})

	t.Run("the lists poll while their stream is down", func(t *testing.T) {
		checkListsPollWhileTheirStreamIsDown(t, b, srv.url)
	})

	t.Run("on a phone the runs list's filters are folded", func(t *testing.T) {
		b.t = t
		b.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
		defer b.do(chromedp.EmulateViewport(1280, 900))
		b.open("/runs")
		b.waitFor("table.list tbody tr.row")
		top, err := strconv.ParseFloat(b.eval(`String(document.querySelector("table.list tbody tr.row").getBoundingClientRect().top)`), 64)
		require.NoError(t, err)
		t.Logf("on a 390×844 phone the first run's row is %.0f px from the top", top)
		assert.Less(t, top, 500.0, "the first runs are on the first screen")
		assert.Equal(t, "390", b.eval(`String(document.documentElement.scrollWidth)`))
		b.shot("runs-phone")
		b.do(chromedp.Click(chromedp.CSS(".filters-box > summary")))
		b.waitFor(`.filters select[name="playbook"]`)
	})
}
