package ui_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A run queued on a concurrency key shows it beside its status: why it
// waits, with no step to look at.
func TestARunQueuedOnAKeySaysSo(t *testing.T) {
	const keyed = "version: 1\nname: %s\nconcurrency: {key: db-maintenance}\nsteps:\n  - {id: nap, uses: sleep, with: {duration: 1h}}\n"
	e := startServer(t, map[string]string{
		"first.yaml":  strings.Replace(keyed, "%s", "first", 1),
		"second.yaml": strings.Replace(keyed, "%s", "second", 1),
	})
	tok := e.signedIn()
	runID(t, e.post("/playbooks/first/runs", url.Values{"csrf": {tok}}))
	id := runID(t, e.post("/playbooks/second/runs", url.Values{"csrf": {tok}}))
	// The run.queued event is written before the record that parks the
	// run, so the event log may say it first: wait for the head's words.
	// The server parks the run once the engine returned it, just after.
	const head, held = `queued on concurrency key <code>db-maintenance</code>`, `>held here</span>`
	p := e.waitFor("/runs/"+id, func(b string) bool { return strings.Contains(b, head) && strings.Contains(b, held) })
	assert.NotContains(t, p.body, `>executing</span>`, "nothing executes it now")
}
