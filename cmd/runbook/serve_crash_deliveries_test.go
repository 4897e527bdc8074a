package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// largeDeliveries returns n UNSUBSCRIBE deliveries of hooks hooks each,
// every hook with a number of its own.
func largeDeliveries(n, hooks int) []delivery {
	out := make([]delivery, n)
	for i := range out {
		d := delivery{id: fmt.Sprintf("big-%03d", i)}
		list := make([]map[string]any, hooks)
		for h := range list {
			hid := fmt.Sprintf("%s-h%04d", d.id, h)
			d.hooks = append(d.hooks, hid)
			list[h] = map[string]any{"hookId": hid, "recipientNo": fmt.Sprintf("010%03d%05d", i, h), "unsubscribeNo": "0801234567"}
		}
		d.body, _ = json.Marshal(map[string]any{"hooksId": d.id, "productName": "SMS", "event": "UNSUBSCRIBE", "hooks": list})
		out[i] = d
	}
	return out
}

// crashDuringLargeDeliveries sends rounds deliveries of hooks hooks to the
// shipped sms-unsubscribe playbook under a real runbook serve, killing it
// with SIGKILL kills times while deliveries arrive (each kill at a moment
// picked by the round) and restarting it; a delivery not answered 200 is
// sent again, as a sender does. Then every acknowledged hook must have
// exactly one run, every run must reach a final status, and the
// suppression file must list each number once.
func crashDuringLargeDeliveries(t *testing.T, rounds, hooks, kills int) {
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	src, err := os.ReadFile(filepath.Join("..", "..", "playbooks", "sms-unsubscribe.yaml"))
	require.NoError(t, err)
	c.file("playbooks/sms-unsubscribe.yaml", string(src))
	c.file("runbook.yaml", "server: {max_body: 1MiB}\nwebhooks:\n  routes:\n    sms: {secret: SMS_WEBHOOK_SECRET}\n")
	supp := filepath.Join(c.dir, "suppression.txt")
	c.env = append(c.env, "SMS_WEBHOOK_SECRET=hook-secret", "SMS_SUPPRESSION_FILE="+supp, "RUNBOOK_FILE_ROOTS="+c.dir)

	deliveries := largeDeliveries(rounds, hooks)
	client := &http.Client{Timeout: 30 * time.Second}
	s := c.serve()
	killed := 0
	var killers sync.WaitGroup
	for i, d := range deliveries {
		// Spread the kills over the rounds, each a little later into its
		// delivery than the one before.
		kill := killed < kills && i*kills/rounds >= killed
		for attempt := 0; ; attempt++ {
			require.Less(t, attempt, 20, "delivery %s was never answered 200", d.id)
			if kill {
				proc := s
				delay := time.Duration(10+40*killed) * time.Millisecond
				killers.Go(func() {
					time.Sleep(delay)
					_ = proc.cmd.Process.Signal(syscall.SIGKILL)
				})
				kill = false
				killed++
			}
			if s.post(client, d, "hook-secret") == http.StatusOK {
				break
			}
			select {
			case <-s.done:
				s = c.serve()
			case <-time.After(time.Second):
			}
		}
		// A kill that came after the answer shows at the next post: restart
		// now so that the next delivery meets a live server.
		select {
		case <-s.done:
			s = c.serve()
		case <-time.After(100 * time.Millisecond):
		}
	}
	require.Equal(t, kills, killed)
	// The last kill may land after the last answer, when no delivery is
	// left to notice it: restart the server it stopped.
	killers.Wait()
	select {
	case <-s.done:
		s = c.serve()
	case <-time.After(100 * time.Millisecond):
	}
	total := rounds * hooks

	// Every run ends, resumed after the kills where it was cut.
	deadline := time.Now().Add(time.Duration(total)*5*time.Millisecond + time.Minute)
	var counts map[string]int
	for {
		counts = runCounts(t, s)
		if counts["succeeded"]+counts["failed"]+counts["cancelled"] >= total && counts["pending"]+counts["running"]+counts["waiting"] == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "runs by status %v, want %d final", counts, total)
		time.Sleep(100 * time.Millisecond)
	}
	assert.Equal(t, total, counts["succeeded"], "one run per hook, each succeeded: %v", counts)

	b, err := os.ReadFile(supp)
	require.NoError(t, err)
	seen := map[string]int{}
	for _, l := range strings.Fields(string(b)) {
		seen[l]++
	}
	for n, k := range seen {
		assert.Equal(t, 1, k, "number %s suppressed %d times", n, k)
	}
	assert.Len(t, seen, total, "every hook's number is in the file")
	s.stop(t)
}

var runGauge = regexp.MustCompile(`(?m)^runbook_runs\{status="([a-z]+)"\} ([0-9.e+]+)$`)

// runCounts reads the run counts by status from /metrics.
func runCounts(t *testing.T, s *serveProc) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, m := range runGauge.FindAllStringSubmatch(s.get(t, "/metrics"), -1) {
		f, _ := strconv.ParseFloat(m[2], 64)
		out[m[1]] = int(f)
	}
	require.NotEmpty(t, out, "no runbook_runs gauge in /metrics")
	return out
}

// TestServeKilledDuringLargeDeliveries is the short version of the soak
// (crash_soak_test.go): 3 deliveries of 200 hooks, two kills.
func TestServeKilledDuringLargeDeliveries(t *testing.T) {
	crashDuringLargeDeliveries(t, 3, 200, 2)
}
