package main

import (
	"context"
	"net/url"
	"time"

	"github.com/runbook/runbook/internal/config"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
	"github.com/runbook/runbook/internal/state/postgres"
)

// isDSN reports a state location that names a PostgreSQL database rather
// than a bbolt file.
func isDSN(loc string) bool { return config.IsDSN(loc) }

// displayLocation is a state location as it may be printed: a DSN's
// password replaced by xxxxx.
func displayLocation(loc string) string {
	if !isDSN(loc) {
		return loc
	}
	u, err := url.Parse(loc)
	if err != nil {
		return "a database URL that does not parse"
	}
	return u.Redacted()
}

// openLocation opens the store a state location names: a PostgreSQL
// database (migrated to this build's schema, shared with other processes)
// or a bbolt file (held by this process alone; timeout bounds the wait for
// another holder).
func openLocation(loc string, timeout time.Duration) (state.Store, error) {
	if isDSN(loc) {
		return postgres.Open(context.Background(), loc, postgres.Options{})
	}
	return bolt.Open(loc, bolt.Options{Timeout: timeout})
}

// stateFile is the state location when it is a file (beside which serve
// records its address for the CLI), "" for a database.
func stateFile(loc string) string {
	if isDSN(loc) {
		return ""
	}
	return loc
}
