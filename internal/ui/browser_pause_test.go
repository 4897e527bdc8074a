package ui_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// browserFreeze's first step notes its start in first.log and waits for
// the file gate (beside the playbook); its second writes second.log.
const browserFreeze = `version: 1
name: ui-freeze
description: Upgrades a cluster in two steps; the first waits for the gate file.
steps:
  - {id: first, uses: shell, with: {command: "echo run >> first.log; while [ ! -e gate ]; do sleep 0.05; done"}}
  - {id: second, uses: shell, with: {command: "echo run >> second.log"}}
`

// A playbook's page pauses its runs in a real Chromium against a real
// runbook serve: a run whose first step executes when the pause is made
// finishes that step and parks, its page saying who paused it and why;
// the playbooks list marks the playbook paused; Resume its runs on the
// playbook's page lets the run finish, each step once.
func TestBrowserPausesAndResumesAPlaybooksRuns(t *testing.T) {
	chromium(t)
	srv := startServe(t, map[string]string{"ui-freeze.yaml": browserFreeze})
	exists := func(name string) bool { _, err := os.Stat(filepath.Join(srv.dir, name)); return err == nil }
	b := newBrowser(t, srv.url)
	b.open("/playbooks/ui-freeze")
	b.waitFor(`input[name="token"]`)
	b.do(chromedp.SetValue(chromedp.CSS("#token"), token), chromedp.SetValue(chromedp.CSS("#name"), "ops-alice"),
		chromedp.Submit(chromedp.CSS("#token")))
	b.waitFor("#start-form button")
	b.do(chromedp.Click(chromedp.CSS("#start-form button")))
	b.waitFor("#run-title")
	runPath := b.eval(`location.pathname`)
	require.True(t, strings.HasPrefix(runPath, "/runs/"), runPath)
	deadline := time.Now().Add(20 * time.Second)
	for !exists("first.log") {
		require.True(t, time.Now().Before(deadline), "the first step executes")
		time.Sleep(50 * time.Millisecond)
	}

	b.open("/playbooks/ui-freeze")
	b.waitFor("#pause-runs-form")
	b.shot("playbook-pause-form")
	b.do(chromedp.SetValue(chromedp.CSS(`#pause-runs-form input[name="reason"]`), "change freeze"),
		chromedp.Click(chromedp.CSS("#pause-runs-form button")))
	b.waitFor("#pause [data-run-pause]")
	notice := b.text("#pause [data-run-pause]")
	assert.Contains(t, notice, "Runs paused by ops-alice", "the name given at sign-in with the server token")
	assert.Contains(t, notice, "change freeze")
	assert.Contains(t, notice, "(pause p")
	require.NoError(t, os.WriteFile(filepath.Join(srv.dir, "gate"), nil, 0o600))

	deadline = time.Now().Add(20 * time.Second)
	for {
		b.open(runPath)
		b.waitFor("#run-title")
		if b.eval(`String(document.querySelectorAll("[data-paused]").length)`) == "1" {
			break
		}
		require.True(t, time.Now().Before(deadline), "the run page says the run is paused")
		time.Sleep(200 * time.Millisecond)
	}
	assert.Equal(t, "paused by ops-alice: change freeze", strings.TrimSpace(strings.TrimPrefix(b.text("[data-paused]"), "‖")))
	b.shot("run-paused")
	assert.False(t, exists("second.log"), "no step started after the pause")

	b.open("/playbooks")
	b.waitFor(`tr[data-href="/playbooks/ui-freeze"] [data-run-pause]`)
	assert.Contains(t, b.text(`tr[data-href="/playbooks/ui-freeze"] [data-run-pause]`), "runs paused")

	b.open("/playbooks/ui-freeze")
	b.waitFor("#resume-runs-form")
	b.shot("playbook-paused")
	b.do(chromedp.Click(chromedp.CSS("#resume-runs-form button")))
	b.waitFor("#pause-runs-form")
	deadline = time.Now().Add(20 * time.Second)
	for !exists("second.log") {
		require.True(t, time.Now().Before(deadline), "the run goes on after the resume")
		time.Sleep(50 * time.Millisecond)
	}
	for {
		b.open(runPath)
		b.waitFor("#run-title")
		if strings.Contains(b.text(`[data-region="head"]`), "succeeded") {
			break
		}
		require.True(t, time.Now().Before(deadline), "the run succeeds")
		time.Sleep(200 * time.Millisecond)
	}
	assert.Equal(t, "0", b.eval(`String(document.querySelectorAll("[data-paused]").length)`))
	for _, name := range []string{"first.log", "second.log"} {
		data, err := os.ReadFile(filepath.Join(srv.dir, name))
		require.NoError(t, err)
		assert.Equal(t, "run\n", string(data), "%s: each step once", name)
	}
}
