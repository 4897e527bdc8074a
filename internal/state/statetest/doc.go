// Package statetest is the contract suite every state.Store passes: the
// bbolt store today, an etcd store later.
//
// A store's test calls Run (or RunClocked, when the store takes a clock)
// with a function that opens a fresh, empty store for each case:
//
//	func TestContract(t *testing.T) {
//		statetest.RunClocked(t, func(t *testing.T, now func() time.Time) state.Store {
//			s, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{Now: now})
//			...
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// The suite checks the documented behaviour of every Store method:
// ErrNotFound and ErrExists through errors.Is, newest-first ListRuns with
// filters and limits, first-saved step order, per-run event sequence
// numbers from 1 with after/limit paging, atomic step-plus-events writes,
// lock ownership, cursor round trips, deduplication expiry and values
// that expire with their keys, refusal of cancelled contexts and
// concurrent writers. Writes to a run that was
// never created must fail with ErrNotFound.
//
// Times in the suite are UTC so records compare equal after encoding.
// Persistence across a reopen is the implementation's own test: the suite
// cannot reopen a store it did not open.
package statetest
