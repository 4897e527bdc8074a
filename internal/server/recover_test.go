package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/server"
	"github.com/runbook/runbook/internal/state"
)

// slowStore fails the first write of each run's run.started event the way
// a state write abandoned by a deadline does, as a committer slower than
// a write's bound made it fail under load.
type slowStore struct {
	state.Store
	mu     sync.Mutex
	failed map[string]bool
}

func (s *slowStore) SaveRun(ctx context.Context, r *state.Run, evs ...state.Event) error {
	return s.SaveRunSteps(ctx, r, nil, evs...)
}

func (s *slowStore) SaveRunSteps(ctx context.Context, r *state.Run, recs []*state.StepRecord, evs ...state.Event) error {
	for _, ev := range evs {
		if ev.Type != "run.started" {
			continue
		}
		s.mu.Lock()
		first := !s.failed[r.ID]
		s.failed[r.ID] = true
		s.mu.Unlock()
		if first {
			return fmt.Errorf("commit: %w", context.DeadlineExceeded)
		}
	}
	return s.Store.SaveRunSteps(ctx, r, recs, evs...)
}

// hooksBody is an UNSUBSCRIBE delivery of n hooks.
func hooksBody(t *testing.T, id string, n int) string {
	t.Helper()
	hooks := make([]map[string]any, n)
	for i := range hooks {
		hooks[i] = map[string]any{"hookId": fmt.Sprintf("%s-%d", id, i), "recipientNo": fmt.Sprintf("010%08d", i),
			"unsubscribeNo": "0808885555", "enterpriseName": "runbook", "createdDateTime": "2026-11-22T09:00:00.000+09:00"}
	}
	b, err := json.Marshal(map[string]any{"hooksId": id, "webhookConfigId": "cfg", "productName": "SMS", "appKey": "app",
		"event": "UNSUBSCRIBE", "hooks": hooks})
	require.NoError(t, err)
	return string(b)
}

// TestEveryRunOfAnAcknowledgedDeliveryFinishesWhenStateWritesFail: a
// 1,000-hook delivery is acknowledged with 1,000 runs; every run's first
// state write after its creation fails (as writes abandoned by a timer
// behind a slow committer did). Every run still reaches a final status,
// and each is counted as taken up again.
func TestEveryRunOfAnAcknowledgedDeliveryFinishesWhenStateWritesFail(t *testing.T) {
	var slow *slowStore
	e := newEnv(t, map[string]string{"hook.yaml": hookPlaybook}, func(o *server.Options) {
		slow = &slowStore{Store: o.Engine.Store, failed: map[string]bool{}}
		o.Engine.Store = slow
	})
	req, err := http.NewRequest("POST", e.url+"/hooks/sms", strings.NewReader(hooksBody(t, "big-1", 1000)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Cloud-Webhook-Signature", "hook-secret")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var ack struct {
		Status string   `json:"status"`
		Runs   []string `json:"runs"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&ack))
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.Len(t, ack.Runs, 1000)

	store := slow.Store
	require.Eventually(t, func() bool {
		runs, err := store.ListRuns(context.Background(), state.RunFilter{Status: []state.RunStatus{state.RunSucceeded}})
		return err == nil && len(runs) == 1000
	}, 60*time.Second, 50*time.Millisecond, "every acknowledged run succeeds")
	for _, id := range ack.Runs {
		r, err := store.GetRun(context.Background(), id)
		require.NoError(t, err)
		assert.Equal(t, state.RunSucceeded, r.Status, "run %s", id)
	}
	m := regexp.MustCompile(`runbook_runs_recovered_total\{reason="returned"\} (\d+)`).FindStringSubmatch(string(e.do("GET", "/metrics", "", nil).body))
	require.NotNil(t, m, "the metric is exposed")
	n, _ := strconv.Atoi(m[1])
	assert.GreaterOrEqual(t, n, 1000, "each run was taken up again at least once")
}
