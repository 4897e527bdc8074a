package postgres

// ClaimLock is the advisory lock key a delivery takes for a dedup key.
var ClaimLock = lockKey

// GroupWorkers is how many group transactions a store runs at once.
const GroupWorkers = groupWorkers

// QueuedDeliveries returns how many deliveries wait for a group commit.
func QueuedDeliveries(s *Store) int {
	s.groups.mu.Lock()
	defer s.groups.mu.Unlock()
	return len(s.groups.queue)
}

// GroupInsert is the statement that writes a delivery group.
const GroupInsert = groupInsert
