//go:build soak

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSoakRepeatedKillsDuringSleeps kills the process in each of many
// sleeps, resuming every time: `go test -tags soak ./cmd/runbook`.
func TestSoakRepeatedKillsDuringSleeps(t *testing.T) {
	const n = 20
	var b strings.Builder
	b.WriteString("version: 1\nname: soak\nsteps:\n")
	var want strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - {id: s%d, uses: shell, with: {command: \"echo %d >> steps.txt\"}}\n", i, i)
		fmt.Fprintf(&b, "  - {id: nap%d, uses: sleep, with: {duration: 1s}}\n", i)
		fmt.Fprintf(&want, "%d\n", i)
	}
	c := newCLI(t)
	pb := c.file("soak.yaml", b.String())
	cmd, id := c.startUntil("step nap0 started", "run", pb)
	for i := 0; ; i++ {
		time.Sleep(time.Duration(50+i*37%300) * time.Millisecond)
		require.NoError(t, cmd.Process.Signal(os.Kill))
		_ = cmd.Wait()
		if i+1 >= n {
			break
		}
		cmd, _ = c.startUntil(fmt.Sprintf("step nap%d started", i+1), "run", "--resume", id)
	}
	r := c.run("run", "--resume", id)
	require.Equal(t, 0, r.code, r)
	got, err := os.ReadFile(filepath.Join(c.dir, "steps.txt"))
	require.NoError(t, err)
	assert.Equal(t, want.String(), string(got))
}

// TestSoakServeKilledDuringLargeDeliveries: 20 deliveries of 1,000 hooks
// each (the largest a sender may send) under ten kill -9s of runbook serve:
// `go test -tags soak -run LargeDeliveries ./cmd/runbook`.
func TestSoakServeKilledDuringLargeDeliveries(t *testing.T) {
	crashDuringLargeDeliveries(t, 20, 1000, 10)
}
