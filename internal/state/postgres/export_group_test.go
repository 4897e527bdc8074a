package postgres

// ClaimLock is the advisory lock key a delivery takes for a dedup key.
var ClaimLock = lockKey

// GroupWorkers is how many group transactions a store runs at once.
const GroupWorkers = groupWorkers

// QueuedDeliveries returns how many deliveries wait for a group commit.
func QueuedDeliveries(s *Store) int {
	return s.groups.waiting()
}

// GroupInsert is the statement that writes a delivery group.
const GroupInsert = groupInsert

// MaxKeptAge is how long what a claim read or a commit took is trusted.
const MaxKeptAge = maxKeptAge
