package ui_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chattyPlaybook prints more lines than the API gives at once, a secret
// input first.
const chattyPlaybook = `version: 1
name: chatty
inputs:
  password: {type: string, secret: true}
steps:
  - id: talk
    uses: shell
    with:
      command: 'echo "key $PW"; seq 1 12000; echo "last line" >&2'
      env: {PW: "${{ inputs.password }}"}
  - id: quiet
    uses: log
    with: {message: "nothing printed"}
`

// A step's whole output downloads as a text file, every line (more than
// one page of the API), masked as the page shows it, for a signed-in
// session only.
func TestAStepsWholeOutputDownloadsAsText(t *testing.T) {
	e := startServer(t, map[string]string{"chatty.yaml": chattyPlaybook})
	tok := e.signedIn()
	id := runID(t, e.post("/playbooks/chatty/runs", url.Values{"csrf": {tok}, "in.password": {"hunter2-very-secret"}}))
	run := e.waitFor("/runs/"+id, func(b string) bool { return !strings.Contains(b, "data-follow") })
	assert.Contains(t, run.body, `href="/runs/`+id+`/output/talk"`, "the run page links each step's download")

	p := e.get("/runs/" + id + "/output/talk")
	require.Equal(t, http.StatusOK, p.status, p.body)
	assert.Equal(t, "text/plain; charset=utf-8", p.header.Get("Content-Type"))
	assert.Equal(t, `attachment; filename=`+id+`-talk.log`, p.header.Get("Content-Disposition"))
	lines := strings.Split(strings.TrimSuffix(p.body, "\n"), "\n")
	require.Len(t, lines, 12002, "every line, past the API's page of 10,000")
	assert.Equal(t, "key ***", lines[0], "the secret masked")
	assert.Contains(t, lines, "12000")
	assert.Contains(t, lines, "last line", "stderr too (its order beside stdout is the pipes')")
	assert.NotContains(t, p.body, "hunter2")

	assert.Equal(t, http.StatusNotFound, e.get("/runs/no-such-run/output/talk").status)
	out := newClient(t, e.srv, e.url)
	p = out.get("/runs/" + id + "/output/talk")
	assert.Equal(t, http.StatusSeeOther, p.status, "signed out: to the sign-in, not the lines")
	assert.NotContains(t, p.body, "12000")
}
