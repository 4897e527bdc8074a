package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
)

// twoPersonPlaybook waits for two approvers, then appends the run's ID to
// dir/after.txt: one line per run that went past the approval.
func twoPersonPlaybook(dir string) string {
	return fmt.Sprintf(`version: 1
name: two-person
steps:
  - id: gate
    uses: approval
    with: {message: "two of you?", required: 2}
  - id: after
    uses: shell
    with: {command: "echo ${{ run.id }} >> %s"}
`, filepath.Join(dir, "after.txt"))
}

// Two approvers answer each run of a required: 2 approval at the same
// instant, one on each replica: every answer that got 200 is in the
// approval's record, a run approved twice goes past the approval exactly
// once and succeeds, a run approved and rejected at once ends failed
// (the rejection always decides), and none waits forever. One approver
// answering on both replicas at once is counted once: one answer is
// refused, and the run waits for a second approver.
func TestAnswersGivenAtOnceOnTwoReplicasAreAllCounted(t *testing.T) {
	_, rs, st := twoReplicas(t, 2)
	c := rs.c
	urls := []string{rs.proc[0].url, rs.proc[1].url}
	n := approvalRaces
	twice := max(n/4, 1) // runs answered by alice on both replicas

	ids := make([]string, 2*n+twice)
	for i := range ids {
		code, run := rs.proc[i%2].api(t, "POST", "/api/v1/playbooks/two-person/runs", map[string]any{})
		require.Equal(t, 201, code, run)
		ids[i] = run["id"].(string)
	}
	for _, id := range ids {
		waitApprovalAsked(t, st, id, 30*time.Second)
	}

	// Run i is answered by alice on replica i%2 and bob on the other; the
	// first n runs are approved by both, the next n rejected by bob; the
	// last ones are approved by alice on both.
	// Run by run (answers to different runs at once would queue behind
	// each other in each replica rather than meet), both answers leave
	// together.
	answers := make([][2]raceAnswer, len(ids))
	for i, id := range ids {
		answers[i] = [2]raceAnswer{{by: "alice", approve: true}, {by: "bob", approve: i < n}}
		if i >= 2*n {
			answers[i][1] = raceAnswer{by: "alice", approve: true}
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for j := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				a := &answers[i][j]
				a.code, a.body = answerRun(urls[(i+j)%2], id, a.by, a.approve)
			}()
		}
		close(start)
		wg.Wait()
	}

	for i, id := range ids[2*n:] {
		i += 2 * n
		rec, err := st.GetApproval(context.Background(), id, "gate")
		require.NoError(t, err, "run %s", id)
		codes := []int{answers[i][0].code, answers[i][1].code}
		slices.Sort(codes)
		assert.Equal(t, []int{200, 409}, codes, "run %s: alice approving on both replicas at once: %v", id, answers[i])
		assert.Len(t, rec.Answers, 1, "run %s: alice counted once", id)
		assert.True(t, rec.Pending, "run %s: one approver of two", id)
		code, body := answerRun(urls[i%2], id, "bob", true)
		assert.Equal(t, 200, code, "run %s: bob's approval after alice's: %s", id, body)
	}

	deadline := time.Now().Add(30 * time.Second)
	for i, id := range ids {
		r := waitFinal(t, st, id, deadline)
		rec, err := st.GetApproval(context.Background(), id, "gate")
		require.NoError(t, err, "run %s", id)
		switch {
		case i < n:
			assertRecorded(t, id, rec, answers[i])
			assert.Equal(t, []int{200, 200}, []int{answers[i][0].code, answers[i][1].code}, "run %s: two approvals at once: %v", id, answers[i])
			assert.Equal(t, state.RunSucceeded, r.Status, "run %s (answers %v)", id, answers[i])
		case i < 2*n:
			assertRecorded(t, id, rec, answers[i])
			assert.Equal(t, 200, answers[i][1].code, "run %s: the rejection is refused: %s", id, answers[i][1].body)
			assert.False(t, rec.Approved, "run %s: the rejection does not decide the record", id)
			assert.Equal(t, state.RunFailed, r.Status, "run %s (answers %v)", id, answers[i])
		default:
			assert.Equal(t, state.RunSucceeded, r.Status, "run %s: approved by alice, then bob", id)
		}
	}

	codes := map[string]int{}
	for i := range ids {
		kind := "approve/approve"
		switch {
		case i >= 2*n:
			kind = "alice twice"
		case i >= n:
			kind = "approve/reject"
		}
		for _, a := range answers[i] {
			codes[fmt.Sprintf("%s %t %d", kind, a.approve, a.code)]++
		}
	}
	t.Logf("answers by kind of run, approve or not, status: %v", codes)

	data, err := os.ReadFile(filepath.Join(c.dir, "after.txt"))
	require.NoError(t, err)
	went := map[string]int{}
	for _, line := range strings.Fields(string(data)) {
		went[line]++
	}
	for i, id := range ids {
		if i < n || i >= 2*n {
			assert.Equal(t, 1, went[id], "run %s went past its approval %d times, want once", id, went[id])
		} else {
			assert.Zero(t, went[id], "run %s went past a rejected approval", id)
		}
	}
}

// raceAnswer is one answer given in a race, and what it got.
type raceAnswer struct {
	by      string
	approve bool
	code    int
	body    string
}

// assertRecorded checks that each answer that got 200 is in the approval's
// record and each that got 409 is not.
func assertRecorded(t *testing.T, id string, rec *state.Approval, answers [2]raceAnswer) {
	t.Helper()
	var recorded []string
	for _, an := range rec.Answers {
		recorded = append(recorded, an.By)
	}
	for _, a := range answers {
		switch a.code {
		case 200:
			assert.Contains(t, recorded, a.by, "run %s: %s's answer got 200 and is not in the record %v", id, a.by, recorded)
		case 409:
			assert.NotContains(t, recorded, a.by, "run %s: %s's answer got 409 and is in the record", id, a.by)
		default:
			t.Errorf("run %s: %s's answer: %d %s", id, a.by, a.code, a.body)
		}
	}
}

// answerRun answers run id's approval "gate" on the server at url and
// returns the status and the body (safe to call from any goroutine).
func answerRun(url, id, by string, approve bool) (int, string) {
	b, _ := json.Marshal(map[string]any{"approve": approve, "step": "gate", "by": by})
	req, err := http.NewRequest("POST", url+"/api/v1/runs/"+id+"/approve", bytes.NewReader(b))
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+serveToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// waitApprovalAsked waits until run id's step "gate" waits, having
// recorded what it asks (an answer before that is checked by the step).
func waitApprovalAsked(t *testing.T, st state.Store, id string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		rec, err := st.GetStep(context.Background(), id, "gate")
		if err == nil && rec.Status == state.StepWaiting && rec.Approval != nil {
			return
		}
		require.True(t, time.Now().Before(deadline), "run %s's approval not asked after %s (%v)", id, within, err)
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFinal waits until run id is final, or deadline: a run still
// unfinished then is reported (with its steps) and returned as it is.
func waitFinal(t *testing.T, st state.Store, id string, deadline time.Time) *state.Run {
	t.Helper()
	for {
		r, err := st.GetRun(context.Background(), id)
		require.NoError(t, err)
		if r.Status.Done() {
			return r
		}
		if time.Now().After(deadline) {
			steps, _ := st.Steps(context.Background(), id)
			var states []string
			for _, s := range steps {
				states = append(states, s.ID+"="+string(s.Status))
			}
			slices.Sort(states)
			t.Errorf("run %s waits forever: still %s (steps %v)", id, r.Status, states)
			return r
		}
		time.Sleep(20 * time.Millisecond)
	}
}
