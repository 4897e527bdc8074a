package postgres_test

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

func TestBothURLSchemesAndTheKeywordFormOpenTheSameDatabase(t *testing.T) {
	dsn := pgtest.DB(t)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	first := open(t, dsn, postgres.Options{})
	require.NoError(t, first.CreateRun(ctx, &state.Run{ID: "r1", Playbook: "pb"}))

	other := *u
	other.Scheme = "postgresql"
	host, port, _ := net.SplitHostPort(u.Host)
	password, _ := u.User.Password()
	keywords := fmt.Sprintf("host=%s port=%s user=%s password=%s dbname=%s search_path=%s sslmode=disable",
		host, port, u.User.Username(), password, strings.TrimPrefix(u.Path, "/"), u.Query().Get("search_path"))
	for name, dsn := range map[string]string{"postgresql://": other.String(), "key=value": keywords} {
		t.Run(name, func(t *testing.T) {
			s := open(t, dsn, postgres.Options{})
			_, err := s.GetRun(ctx, "r1")
			assert.NoError(t, err)
		})
	}
}

func TestAURLOfAnotherSchemeIsInvalid(t *testing.T) {
	_, err := postgres.Open(ctx, "mysql://runbook:s3cret-pw@127.0.0.1/db", postgres.Options{})
	require.Error(t, err)
	assert.Equal(t, fault.Invalid, fault.CodeOf(err), err.Error())
	assert.NotContains(t, err.Error(), "s3cret-pw")
}

func TestAMalformedDSNIsInvalidAndNotRepeated(t *testing.T) {
	_, err := postgres.Open(ctx, "postgres://runbook:s3cret-pw@127.0.0.1:notaport/db", postgres.Options{})
	require.Error(t, err)
	assert.Equal(t, fault.Invalid, fault.CodeOf(err), err.Error())
	assert.NotContains(t, err.Error(), "s3cret-pw")
}

func TestAServerThatDoesNotAnswerIsUnavailableWithinTheTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there now

	start := time.Now()
	_, err = postgres.Open(ctx, "postgres://runbook:s3cret-pw@"+addr+"/db?sslmode=disable", postgres.Options{Timeout: 3 * time.Second})
	require.Error(t, err)
	assert.Less(t, time.Since(start), 10*time.Second)
	assert.Equal(t, fault.Unavailable, fault.CodeOf(err), err.Error())
	assert.Contains(t, err.Error(), addr+"/db", "the error names the database")
	assert.NotContains(t, err.Error(), "s3cret-pw")
}

func TestAWrongPasswordIsRefusedWithoutRepeatingIt(t *testing.T) {
	u, err := url.Parse(pgtest.DB(t))
	require.NoError(t, err)
	u.User = url.UserPassword(u.User.Username(), "wrong-s3cret")
	_, err = postgres.Open(ctx, u.String(), postgres.Options{Timeout: 10 * time.Second})
	require.Error(t, err)
	assert.Equal(t, fault.Unavailable, fault.CodeOf(err), err.Error())
	assert.NotContains(t, err.Error(), "wrong-s3cret")
}

func TestTheLogsNameTheDatabaseNeverThePassword(t *testing.T) {
	dsn := pgtest.DB(t)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	password, ok := u.User.Password()
	require.True(t, ok, "the test server has a password")

	var logs logBuffer
	s := open(t, dsn, postgres.Options{Logger: logs.logger()})
	target := u.Host + u.Path
	assert.Equal(t, target, s.Target())
	assert.Contains(t, logs.String(), "database="+target)
	assert.NotContains(t, logs.String(), password)
}

func TestAKeywordDSNMayHoldWhatLooksLikeAScheme(t *testing.T) {
	u, err := url.Parse(pgtest.DB(t))
	require.NoError(t, err)
	host, port, _ := net.SplitHostPort(u.Host)
	password, _ := u.User.Password()
	// The application name holds "://": still a key=value DSN, not a URL.
	dsn := fmt.Sprintf("application_name=http://x host=%s port=%s user=%s password=%s dbname=%s search_path=%s sslmode=disable",
		host, port, u.User.Username(), password, strings.TrimPrefix(u.Path, "/"), u.Query().Get("search_path"))
	open(t, dsn, postgres.Options{})
}

// The pool has room for concurrent commits unless the DSN or the options
// size it.
func TestThePoolIsSizedForConcurrentCommitsUnlessToldOtherwise(t *testing.T) {
	dsn := pgtest.DB(t)
	assert.Equal(t, postgres.DefaultMaxConns(), postgres.MaxConns(open(t, dsn, postgres.Options{})))
	assert.GreaterOrEqual(t, postgres.DefaultMaxConns(), int32(16))
	assert.Equal(t, int32(3), postgres.MaxConns(open(t, dsn+"&pool_max_conns=3", postgres.Options{})))
	assert.Equal(t, int32(5), postgres.MaxConns(open(t, dsn+"&pool_max_conns=3", postgres.Options{MaxConns: 5})))
}
