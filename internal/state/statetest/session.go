package statetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// RunSessions runs the contract of state.SessionStore against stores from
// open, one fresh and empty store per test.
func RunSessions(t *testing.T, open func(t *testing.T) state.SessionStore) {
	t.Helper()
	t.Run("a session is read back as written and replaced by a put of its key", func(t *testing.T) { testSessionPut(t, open(t)) })
	t.Run("a deleted session is gone and deleting none is no error", func(t *testing.T) { testSessionDelete(t, open(t)) })
	t.Run("pruning deletes only sessions that expire before the bound", func(t *testing.T) { testSessionPrune(t, open(t)) })
}

func key(c byte) string {
	b := make([]byte, 64)
	for i := range b {
		b[i] = c
	}
	return string(b)
}

func testSessionPut(t *testing.T, s state.SessionStore) {
	ctx := context.Background()
	if _, err := s.Session(ctx, key('a')); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("session of a new store: got %v, want ErrNotFound", err)
	}
	in := state.Session{Key: key('a'), Kind: "oidc", Name: "alice", Roles: []string{"viewer", "approver"},
		Created: at0, Seen: at0.Add(time.Minute), Expires: at0.Add(time.Hour)}
	must(t, s.PutSession(ctx, in))
	must(t, s.PutSession(ctx, state.Session{Key: key('b'), Kind: "token", TokenHash: key('f'), Created: at0, Seen: at0, Expires: at0.Add(time.Hour)}))
	got, err := s.Session(ctx, key('a'))
	must(t, err)
	if got.Key != in.Key || got.Kind != "oidc" || got.Name != "alice" || len(got.Roles) != 2 || got.Roles[1] != "approver" ||
		!got.Created.Equal(in.Created) || !got.Seen.Equal(in.Seen) || !got.Expires.Equal(in.Expires) {
		t.Fatalf("session a: got %+v, want %+v", got, in)
	}
	in.Seen, in.Expires = at0.Add(2*time.Minute), at0.Add(2*time.Hour)
	must(t, s.PutSession(ctx, in))
	got, err = s.Session(ctx, key('a'))
	must(t, err)
	if !got.Seen.Equal(in.Seen) || !got.Expires.Equal(in.Expires) {
		t.Fatalf("session a after a second put: got %+v, want seen %s", got, in.Seen)
	}
	got, err = s.Session(ctx, key('b'))
	must(t, err)
	if got.Kind != "token" || got.TokenHash != key('f') {
		t.Fatalf("session b: got %+v", got)
	}
}

func testSessionDelete(t *testing.T, s state.SessionStore) {
	ctx := context.Background()
	must(t, s.DeleteSession(ctx, key('a')))
	must(t, s.PutSession(ctx, state.Session{Key: key('a'), Kind: "token", TokenHash: key('f'), Created: at0, Seen: at0, Expires: at0.Add(time.Hour)}))
	must(t, s.DeleteSession(ctx, key('a')))
	if _, err := s.Session(ctx, key('a')); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("deleted session: got %v, want ErrNotFound", err)
	}
}

func testSessionPrune(t *testing.T, s state.SessionStore) {
	ctx := context.Background()
	for i, c := range []byte{'a', 'b', 'c'} {
		must(t, s.PutSession(ctx, state.Session{Key: key(c), Kind: "token", TokenHash: key('f'), Created: at0, Seen: at0,
			Expires: at0.Add(time.Duration(i+1) * time.Hour)}))
	}
	n, err := s.PruneSessions(ctx, at0.Add(2*time.Hour+time.Second))
	must(t, err)
	if n != 2 {
		t.Fatalf("pruned %d sessions, want 2 (those expiring at +1h and +2h)", n)
	}
	for _, c := range []byte{'a', 'b'} {
		if _, err := s.Session(ctx, key(c)); !errors.Is(err, state.ErrNotFound) {
			t.Fatalf("pruned session %c: got %v, want ErrNotFound", c, err)
		}
	}
	if _, err := s.Session(ctx, key('c')); err != nil {
		t.Fatalf("kept session: %v", err)
	}
}
