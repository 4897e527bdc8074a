package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ticksPlaybook's step prints a line every half second, each with the
// moment it printed it (Unix milliseconds), for about ticks/2 seconds,
// then runs 2 s more: a reader polling on a loaded machine still reads
// the last line while the step runs.
func ticksPlaybook(ticks int) string {
	return fmt.Sprintf(`version: 1
name: tick
steps:
  - {id: cordon, uses: shell, with: {command: "echo cordoned"}}
  - id: tick
    uses: shell
    with: {command: 'sleep 0.5; for i in $(seq 1 %d); do echo "tick $i at $(date +%%s%%3N)"; sleep 0.5; done; sleep 2'}
`, ticks)
}

// tickLine is a line ticksPlaybook printed: its number and when.
var tickLine = regexp.MustCompile(`tick (\d+) at (\d{13})`)

// lineWatch checks, over readings of what a reader shows (runs show,
// the API), that each line a step printed is shown within a second of
// being printed: a reading started more than a second after a line was
// printed must show it (unless it scrolled out of the last window lines
// the reading shows). A slow reading only makes fewer readings, never a
// false failure. Readings are judged at the end, when every line's time
// is known.
type lineWatch struct {
	t *testing.T
	// window is how many of the last lines a reading shows (0: all): runs
	// show prints a running step's last shownLines.
	window   int
	printed  map[int]time.Time // line number -> when printed
	readings []reading
}

// reading is what one reading, started at start, showed.
type reading struct {
	start time.Time
	shown map[int]bool
	last  int // the last line shown
}

func newLineWatch(t *testing.T, window int) *lineWatch {
	return &lineWatch{t: t, window: window, printed: map[int]time.Time{}}
}

// sample records what one reading, started at start, showed.
func (w *lineWatch) sample(start time.Time, shown string) {
	r := reading{start: start, shown: map[int]bool{}}
	for _, m := range tickLine.FindAllStringSubmatch(shown, -1) {
		n, _ := strconv.Atoi(m[1])
		ms, _ := strconv.ParseInt(m[2], 10, 64)
		r.shown[n], r.last = true, max(r.last, n)
		w.printed[n] = time.UnixMilli(ms)
	}
	w.readings = append(w.readings, r)
}

// check asserts that every line up to want was seen, none late.
func (w *lineWatch) check(want int) {
	w.t.Helper()
	for n := 1; n <= want; n++ {
		assert.Contains(w.t, w.printed, n, "line %d never shown while the step ran (%d readings)", n, len(w.readings))
	}
	var late []string
	for _, r := range w.readings {
		for n, at := range w.printed {
			if r.shown[n] || r.start.Sub(at) <= time.Second || (w.window > 0 && n <= r.last-w.window) {
				continue
			}
			late = append(late, fmt.Sprintf("line %d missing from a reading started %s after it was printed", n, r.start.Sub(at).Round(time.Millisecond)))
		}
	}
	assert.Empty(w.t, late, "%d readings", len(w.readings))
}

// While `runbook run` executes a shell step that prints a line every half
// second, `runbook runs show` (through the run's socket) shows the step
// running, its attempt and how long it has run, and the lines printed so
// far, each within a second of being printed. Before, it said "no steps
// have run" until the step ended.
func TestRunsShowShowsARunningStepWithItsLinesAsTheyArePrinted(t *testing.T) {
	c := newCLI(t)
	const ticks = 6
	b := c.startRun(t, "step tick started", "run", c.file("tick.yaml", ticksPlaybook(ticks)))
	w := newLineWatch(t, shownLines)
	running := regexp.MustCompile(`(?m)^tick\s+running\s+1\s+\d[\d.hms]*…`)
	deadline := time.Now().Add(60 * time.Second)
	for {
		require.True(t, time.Now().Before(deadline), "the run did not end within 60s:\n%s", b.out)
		start := time.Now()
		r := c.run("runs", "show", b.id)
		if r.code != 0 && b.ending() {
			t.Logf("runs show while runbook run was ending: %s", r)
			break
		}
		require.Equal(t, 0, r.code, r)
		if strings.Contains(r.stdout, "status:    succeeded") {
			break
		}
		if running.MatchString(r.stdout) {
			assert.Regexp(t, `step tick is running: attempt 1, for \d[\d.hms]*`, r.stdout)
			assert.Regexp(t, `(?m)^cordon\s+succeeded\s+1\s`, r.stdout)
			w.sample(start, r.stdout)
		}
	}
	w.check(ticks)
	require.Equal(t, 0, b.exit(t), b.out.String())
}

// ending reports whether the background run has ended, or ends within 5 s:
// a runs show that races its exit (its socket closing) may fail.
func (b *bgRun) ending() bool {
	select {
	case <-b.done:
		return true
	case <-time.After(5 * time.Second):
		return false
	}
}

// A run whose process was killed while a step ran is shown interrupted,
// and so is the step, which says it was running when the process stopped
// (not that it runs still), with what it printed; a resume runs it again,
// as a new attempt.
func TestRunsShowOfAKilledRunDoesNotClaimTheStepStillRuns(t *testing.T) {
	c := newCLI(t)
	pb := c.file("long.yaml", `version: 1
name: long
steps:
  - id: long
    uses: shell
    with: {command: 'echo "draining node-7"; test -e resumed || sleep 60'}
`)
	b := c.startRun(t, "step long started", "run", pb)
	until(t, "the step's line is stored", func() bool {
		return strings.Contains(c.run("runs", "show", b.id).stdout, "draining node-7")
	})
	require.NoError(t, b.cmd.Process.Signal(syscall.SIGKILL))
	b.exit(t)

	r := c.run("runs", "show", b.id)
	require.Equal(t, 0, r.code, r)
	assert.Regexp(t, `status:\s+interrupted`, r.stdout)
	assert.Regexp(t, `(?m)^long\s+interrupted\s+1\s+-`, r.stdout)
	assert.Contains(t, r.stdout, "step long was running (attempt 1) when the process that ran it stopped; it runs again when the run resumes")
	assert.Contains(t, r.stdout, "| draining node-7")
	assert.NotContains(t, r.stdout, "is running")

	c.file("resumed", "")
	r = c.run("run", "--resume", b.id)
	require.Equal(t, 0, r.code, r)
	r = c.run("runs", "show", b.id)
	assert.Regexp(t, `status:\s+succeeded`, r.stdout)
	assert.Regexp(t, `(?m)^long\s+succeeded\s+2\s`, r.stdout, "run again, as attempt 2")
}

// While `runbook serve` executes a shell step that prints a line every
// half second, GET /api/v1/runs/{id} has the step's record, running in
// its first attempt with its start, and GET /api/v1/runs/{id}/output
// (the link the API documents for a step's lines) has the lines printed
// so far, each within a second of being printed. Before, the run had no
// record of the step until it ended.
func TestTheAPIShowsARunningStepAndItsLinesAsTheyArePrinted(t *testing.T) {
	c := newCLI(t)
	require.NoError(t, os.Mkdir(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("playbooks/tick.yaml", ticksPlaybook(6))
	s := c.serve("--playbooks", "playbooks")
	code, started := s.api(t, http.MethodPost, "/api/v1/playbooks/tick/runs", map[string]any{})
	require.Equal(t, http.StatusCreated, code, started)
	id, _ := started["id"].(string)
	require.NotEmpty(t, id, started)

	w := newLineWatch(t, 0)
	deadline := time.Now().Add(60 * time.Second)
	for {
		require.True(t, time.Now().Before(deadline), "the run did not end within 60s")
		start := time.Now()
		_, run := s.api(t, http.MethodGet, "/api/v1/runs/"+id, nil)
		if run["status"] == "succeeded" {
			break
		}
		steps, _ := run["steps"].([]any)
		var tick map[string]any
		for _, st := range steps {
			if m, _ := st.(map[string]any); m["id"] == "tick" {
				tick = m
			}
		}
		if tick == nil || tick["status"] != "running" {
			continue
		}
		assert.EqualValues(t, 1, tick["attempts"])
		assert.NotEmpty(t, tick["started_at"])
		assert.Empty(t, tick["ended_at"])
		resp := s.get(t, "/api/v1/runs/"+id+"/output?step=tick")
		w.sample(start, resp)
	}
	w.check(6)
}

// get is a GET of the API, its body as text.
func (s *serveProc) get(t *testing.T, path string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.url+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+serveToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	var page struct {
		Lines []struct {
			Text string `json:"text"`
		} `json:"lines"`
	}
	if json.Unmarshal(b, &page) == nil && page.Lines != nil {
		texts := make([]string, len(page.Lines))
		for i, l := range page.Lines {
			texts[i] = l.Text
		}
		return strings.Join(texts, "\n")
	}
	return string(b)
}

// until waits up to 20 s for cond.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "not %s within 20s", what)
		time.Sleep(20 * time.Millisecond)
	}
}
