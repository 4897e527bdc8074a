package bolt_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state/bolt"
)

// lane records, for each write, the transaction that committed it.
type lane struct {
	mu sync.Mutex
	tx map[string]int
}

func (l *lane) write(name string) func(tx *bbolt.Tx) error {
	return func(tx *bbolt.Tx) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.tx[name] = tx.ID() // the last run is the one that counts
		return tx.Bucket([]byte("cursors")).Put([]byte(name), []byte("v"))
	}
}

// TestUrgentWritesAreCommittedBeforeQueuedOnesAndDoNotStarveThem holds
// the writer, queues 600 ordinary writes and then 3 urgent ones, and
// releases it: the urgent ones share the next transaction alone, and the
// ordinary ones follow in the transactions after, none left behind.
func TestUrgentWritesAreCommittedBeforeQueuedOnesAndDoNotStarveThem(t *testing.T) {
	s, err := bolt.Open(filepath.Join(t.TempDir(), "s.db"), bolt.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	l := &lane{tx: map[string]int{}}
	release := holdWriter(t, s)
	var wg sync.WaitGroup
	queue := func(name string, urgent bool) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			up := bolt.Update
			if urgent {
				up = bolt.UpdateUrgent
			}
			assert.NoError(t, up(context.Background(), s, l.write(name)))
		}()
	}
	for i := range 600 {
		queue(fmt.Sprintf("step-%03d", i), false)
	}
	waitQueued(t, s, 600)
	for i := range 3 {
		queue(fmt.Sprintf("hook-%d", i), true)
	}
	waitQueued(t, s, 603)
	release()
	wg.Wait()

	first := l.tx["hook-0"]
	var firstStep, lastStep int
	for name, tx := range l.tx {
		if name[:4] == "hook" {
			assert.Equal(t, first, tx, "the urgent writes share one transaction")
			continue
		}
		if firstStep == 0 || tx < firstStep {
			firstStep = tx
		}
		lastStep = max(lastStep, tx)
	}
	require.Len(t, l.tx, 603)
	assert.Less(t, first, firstStep, "the urgent writes commit before every queued ordinary one")
	assert.Equal(t, first+1, firstStep, "ordinary writes follow at once")
	assert.Equal(t, first+3, lastStep, "600 ordinary writes take three groups of at most 256")
}

// TestAnUrgentLaneKeptBusyStillLetsOrdinaryWritesThrough alternates: after
// a group of urgent writes alone, waiting ordinary writes go first.
func TestAnUrgentLaneKeptBusyStillLetsOrdinaryWritesThrough(t *testing.T) {
	s, err := bolt.Open(filepath.Join(t.TempDir(), "s.db"), bolt.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	l := &lane{tx: map[string]int{}}
	var wg sync.WaitGroup
	queue := func(name string, urgent bool) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			up := bolt.Update
			if urgent {
				up = bolt.UpdateUrgent
			}
			assert.NoError(t, up(context.Background(), s, l.write(name)))
		}()
	}
	release := holdWriter(t, s)
	queue("step", false)
	waitQueued(t, s, 1)
	for i := range 300 {
		queue(fmt.Sprintf("hook-%03d", i), true)
	}
	waitQueued(t, s, 301)
	release()
	wg.Wait()
	// Group 1: 256 urgent writes alone; group 2: the ordinary write first,
	// then the remaining 44 urgent ones.
	groups := map[int]int{}
	firstGroup := 0
	for name, tx := range l.tx {
		if name != "step" {
			groups[tx]++
			if firstGroup == 0 || tx < firstGroup {
				firstGroup = tx
			}
		}
	}
	assert.Equal(t, 256, groups[firstGroup], "a full group of urgent writes alone")
	assert.Equal(t, firstGroup+1, l.tx["step"], "the ordinary write is not starved by a busy urgent lane")
	assert.Equal(t, 44, groups[l.tx["step"]], "the rest of the urgent writes share its group")
}
