package ui_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

const printingPlaybook = `version: 1
name: printing
steps:
  - id: build
    uses: shell
    with: {command: "echo '<b>bold</b> & more'; echo warning >&2"}
  - id: quiet
    uses: set
    with: {x: 1}
`

func TestRunPageShowsWhatAStepPrintedEscaped(t *testing.T) {
	e := startServer(t, map[string]string{"printing.yaml": printingPlaybook})
	tok := e.signedIn()
	id := runID(t, e.post("/playbooks/printing/runs", url.Values{"csrf": {tok}}))
	p := e.waitFor("/runs/"+id, func(b string) bool { return strings.Contains(b, "2 lines printed") })
	assert.Contains(t, p.body, `<span class="out-stdout" title="`)
	assert.Contains(t, p.body, `&lt;b&gt;bold&lt;/b&gt; &amp; more</span>`)
	assert.NotContains(t, p.body, "<b>bold</b>")
	assert.Contains(t, p.body, `<span class="out-stderr"`)
	assert.Contains(t, p.body, `stderr">warning</span>`)
	assert.Equal(t, 1, strings.Count(p.body, `class="printed"`), "a step that printed nothing has no block")
	assertNoInlineCode(t, p.body)
}
