package bolt

// AllocatedBytes returns the page bytes the store's transactions have
// allocated so far (bbolt's TxStats.PageAlloc), for cost tests.
func AllocatedBytes(s *Store) int64 {
	st := s.db.Stats()
	return st.TxStats.GetPageAlloc()
}
