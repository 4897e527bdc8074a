//go:build soak

package main

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The acceptance of issue 27 at its length: a step printing a line every
// half second for a minute, watched through runs show (runbook run, its
// socket) and the API (runbook serve); each line shown within a second
// of being printed, the step running all along. The default suite runs
// the same for three seconds (running_step_test.go).
func TestSoakARunningStepWatchedForAMinute(t *testing.T) {
	const ticks = 120
	t.Run("runs show", func(t *testing.T) {
		c := newCLI(t)
		b := c.startRun(t, "step tick started", "run", c.file("tick.yaml", ticksPlaybook(ticks)))
		w := newLineWatch(t, shownLines)
		running := regexp.MustCompile(`(?m)^tick\s+running\s+1\s`)
		deadline := time.Now().Add(3 * time.Minute)
		for time.Now().Before(deadline) {
			start := time.Now()
			r := c.run("runs", "show", b.id)
			if r.code != 0 && b.ending() {
				break
			}
			require.Equal(t, 0, r.code, r)
			if strings.Contains(r.stdout, "status:    succeeded") {
				break
			}
			if running.MatchString(r.stdout) {
				w.sample(start, r.stdout)
			}
		}
		w.check(ticks)
	})
	t.Run("the API", func(t *testing.T) {
		c := newCLI(t)
		require.NoError(t, os.Mkdir(filepath.Join(c.dir, "playbooks"), 0o700))
		c.file("playbooks/tick.yaml", ticksPlaybook(ticks))
		s := c.serve("--playbooks", "playbooks")
		code, started := s.api(t, http.MethodPost, "/api/v1/playbooks/tick/runs", map[string]any{})
		require.Equal(t, http.StatusCreated, code, started)
		id, _ := started["id"].(string)
		w := newLineWatch(t, 0)
		deadline := time.Now().Add(3 * time.Minute)
		for time.Now().Before(deadline) {
			start := time.Now()
			_, run := s.api(t, http.MethodGet, "/api/v1/runs/"+id, nil)
			if run["status"] == "succeeded" {
				break
			}
			w.sample(start, s.get(t, "/api/v1/runs/"+id+"/output?step=tick"))
		}
		w.check(ticks)
	})
}
