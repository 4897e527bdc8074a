package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStateIsAFileOrADatabase(t *testing.T) {
	assert.Equal(t, "/srv/rb/data/state.db", parseOK(t, "state: data/state.db\n").State)
	assert.Equal(t, "/srv/rb/s.db", parseOK(t, "state: {file: s.db}\n").State)
	dsn := "postgres://runbook@db.internal:5432/runbook?sslmode=require"
	assert.Equal(t, dsn, parseOK(t, "state: "+dsn+"\n").State, "a DSN is not a path to resolve")
	c := parseOK(t, "state:\n  dsn: "+dsn+"\n  password_secret: RUNBOOK_DB_PASSWORD\n")
	assert.Equal(t, dsn, c.State)
	assert.Equal(t, "RUNBOOK_DB_PASSWORD", c.StatePasswordSecret)
	assert.Contains(t, c.SecretRefs(), "RUNBOOK_DB_PASSWORD")

	got, err := c.StateDSN(func(name string) (string, bool) { return "s3cr:et/", name == "RUNBOOK_DB_PASSWORD" })
	require.NoError(t, err)
	assert.Equal(t, "postgres://runbook:s3cr%3Aet%2F@db.internal:5432/runbook?sslmode=require", got)
	_, err = c.StateDSN(func(string) (string, bool) { return "", false })
	assert.EqualError(t, err, "state.password_secret: secret RUNBOOK_DB_PASSWORD is not set")

	plain := parseOK(t, "state: "+dsn+"\n")
	got, err = plain.StateDSN(func(string) (string, bool) { t.Fatal("no secret to look up"); return "", false })
	require.NoError(t, err)
	assert.Equal(t, dsn, got)
}

func TestStateMistakesAreTold(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"state: postgres://rb:hunter2@db/rb\n",
			"rb.yaml:1:8: state: holds a password: put it in a secret named by state.password_secret (or PGPASSWORD), not in the config file"},
		{"state: {file: a.db, dsn: postgres://db/rb}\n", "rb.yaml:1:26: state.dsn: give either state.file or state.dsn, not both"},
		{"state: {password_secret: P}\n", "rb.yaml:1:8: state: give state.file (a bbolt file) or state.dsn (a postgres:// database)"},
		{"state: {dsn: mysql://db/rb}\n", "rb.yaml:1:14: state.dsn: must be a postgres:// or postgresql:// URL"},
		{"state: {file: postgres://db/rb}\n", "rb.yaml:1:15: state.file: is a database URL: write it as state.dsn"},
		{"state: {file: a.db, password_secret: P}\n", "rb.yaml:1:38: state.password_secret: applies to state.dsn"},
		{"state: {dsm: postgres://db/rb}\n", `rb.yaml:1:9: state.dsm: unknown key "dsm"; did you mean "dsn"?`},
	} {
		t.Run(tc.want, func(t *testing.T) {
			assert.Contains(t, diags(t, tc.src), tc.want)
		})
	}
}
