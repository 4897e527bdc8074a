package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A step's download (GET /runs/{id}/output/{step} of the web UI) is
// judged as its run's page is: by the API, as the signed-in identity, so
// an identity that may not see the run's playbook gets no line of it.
func TestAStepsDownloadIsCheckedAsItsRunPageIs(t *testing.T) {
	ml := strings.Replace(approvalPlaybook, "name: gate", "name: tune\nlabels: {team: ml-platform}", 1)
	e := newEnv(t, map[string]string{"gate.yaml": approvalPlaybook, "tune.yaml": ml}, withPeople)
	waiting := e.newRun()
	for who, want := range map[string]int{"mlop": http.StatusForbidden, "vera": http.StatusOK, "root": http.StatusOK} {
		t.Run(who, func(t *testing.T) {
			b := e.browser(t)
			require.Equal(t, http.StatusSeeOther, b.signIn(people[who].token))
			page, _ := b.send(http.MethodGet, "/runs/"+waiting, nil)
			status, body := b.send(http.MethodGet, "/runs/"+waiting+"/output/greet", nil)
			assert.Equal(t, page, status, "the download answers as the run page does")
			assert.Equal(t, want, status, body)
		})
	}
}
