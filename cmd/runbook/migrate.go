package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/runbook/runbook/internal/state/postgres"
)

var migrateVerb = &verb{
	name:    "migrate",
	usage:   "[--state postgres://…] [--dry-run]",
	summary: "bring a PostgreSQL state database to this build's schema (--dry-run prints the SQL instead)",
	run:     cmdMigrate,
}

// cmdMigrate applies the embedded migrations a database lacks, as every
// runbook process does when it opens the database; --dry-run prints them.
func cmdMigrate(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name:  "migrate",
		usage: "[--state postgres://…] [--dry-run]",
		summary: "Bring the PostgreSQL state database to this build's schema. Every runbook process applies the " +
			"missing migrations when it opens the database (under an advisory lock, additive only); this verb does it " +
			"ahead of a rolling upgrade, and --dry-run prints the SQL that would run without running it.",
	})
	var sf stateFlags
	sf.addState(fs)
	dry := fs.Bool("dry-run", false, "print the pending migrations' SQL; change nothing")
	_, err := parsePositional(fs, args, 0, 0, "")
	if err != nil {
		return err
	}
	loc, err := sf.statePath()
	if err != nil {
		return err
	}
	if !isDSN(loc) {
		return &exitError{code: 2, err: errors.New("migrate applies to a PostgreSQL state; the state is the file " + loc),
			hint: "runbook migrate --state postgres://USER@HOST/DB (a bbolt file needs no migration)"}
	}
	pending, err := postgres.Pending(ctx, loc)
	if err != nil {
		return storeError(err)
	}
	if len(pending) == 0 {
		fmt.Fprintf(a.stdout, "%s is up to date\n", displayLocation(loc))
		return nil
	}
	if *dry {
		for _, m := range pending {
			fmt.Fprintf(a.stdout, "-- migration %04d %s\n%s\n", m.Version, m.Name, m.SQL)
		}
		return nil
	}
	st, err := openLocation(loc, lockTimeout)
	if err != nil {
		return storeError(err)
	}
	defer st.Close()
	for _, m := range pending {
		fmt.Fprintf(a.stdout, "applied %04d %s\n", m.Version, m.Name)
	}
	return nil
}
