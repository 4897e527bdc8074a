package postgres

// Retries returns how many transactions the store ran again after
// PostgreSQL aborted them (a deadlock, a serialization failure).
func Retries(s *Store) int64 { return s.retries.Load() }

// ListQuery is the SQL and arguments of ListRuns.
var ListQuery = listQuery

// MaxConns is the size of the store's pool.
func MaxConns(s *Store) int32 { return s.pool.Config().MaxConns }
