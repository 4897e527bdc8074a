package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

// On a database, a run recorded cancelled by another process while it
// executes here, with no notice reaching this one (its notice connection
// down, or no listener at all: runbook run), is not overwritten by the
// run's next write: the store refuses it, and the run ends cancelled here
// as any cancelled run does — the steps after are not run, its finally
// step runs, its concurrency key is released — with the cancellation's
// message. (Steps that write no run record, as a shell step, run before
// the refusal: a notice, when heard, stops the run sooner.)
func TestARunCancelledByAnotherProcessIsNotOverwrittenByItsNextWrite(t *testing.T) {
	for _, tc := range []struct {
		name, next string
		after      bool // the step after runs before the run's next write
	}{
		{"its next write parks it", "  - {id: nap, uses: sleep, with: {duration: 1h}}\n", false},
		{"its next write ends it succeeded", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dsn := pgtest.DB(t)
			st, err := postgres.Open(ctx, dsn, postgres.Options{})
			require.NoError(t, err)
			defer st.Close()
			other, err := postgres.Open(ctx, dsn, postgres.Options{})
			require.NoError(t, err)
			defer other.Close()

			dir := t.TempDir()
			fifo := filepath.Join(dir, "go")
			require.NoError(t, syscall.Mkfifo(fifo, 0o600))
			src := fmt.Sprintf(`version: 1
name: cut
concurrency: {key: cut-key}
steps:
  - {id: work, uses: shell, with: {command: "read x < %s"}}
%s  - {id: after, uses: shell, with: {command: "echo after >> %s"}}
finally:
  - {id: tidy, uses: shell, with: {command: "echo finally >> %s"}}
`, fifo, tc.next, filepath.Join(dir, "after.txt"), filepath.Join(dir, "finally.txt"))
			pb, err := playbook.Parse(filepath.Join(dir, "cut.yaml"), []byte(src), playbook.LoadOptions{})
			require.NoError(t, err)
			e := engine.New(engine.Options{Store: st, Environ: os.Environ(), Process: "host-a/1", Host: engine.Host{ParkAfter: 2 * time.Second}})

			run, err := e.Start(ctx, pb, engine.StartRequest{})
			require.NoError(t, err)
			type result struct {
				r   *state.Run
				err error
			}
			done := make(chan result, 1)
			go func() {
				r, err := e.Execute(ctx, pb, run)
				done <- result{r, err}
			}()
			require.Eventually(t, func() bool {
				r, err := st.GetRun(ctx, run.ID)
				return err == nil && r.Status == state.RunRunning
			}, 10*time.Second, 10*time.Millisecond, "the run is recorded running (its first step waits for the test)")

			// Another process records the cancellation; no notice
			// reaches this engine.
			cur, err := other.GetRun(ctx, run.ID)
			require.NoError(t, err)
			cur.Status, cur.EndedAt = state.RunCancelled, time.Now()
			cur.Error = &state.ErrorRecord{Code: "cancelled", Message: "run cancelled by bob"}
			require.NoError(t, other.SaveRun(ctx, cur, state.Event{Type: "run.cancelled", Message: "run cancelled by bob"}))
			w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = w.WriteString("go\n")
			require.NoError(t, err)
			require.NoError(t, w.Close())

			var res result
			select {
			case res = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("the run did not end")
			}
			require.NotNil(t, res.r)
			assert.Equal(t, state.RunCancelled, res.r.Status, "err %v", res.err)
			got, err := st.GetRun(ctx, run.ID)
			require.NoError(t, err)
			assert.Equal(t, state.RunCancelled, got.Status, "the cancellation stands")
			require.NotNil(t, got.Error)
			assert.Contains(t, got.Error.Message, "cancelled by bob")
			b, _ := os.ReadFile(filepath.Join(dir, "finally.txt"))
			assert.Equal(t, "finally\n", string(b), "its finally step ran once")
			_, err = os.Stat(filepath.Join(dir, "after.txt"))
			assert.Equal(t, tc.after, err == nil, "the step after ran: %v", err == nil)
			locks, err := st.Locks(ctx)
			require.NoError(t, err)
			assert.Empty(t, locks, "its concurrency key is released")
		})
	}
}
