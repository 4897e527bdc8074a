package statetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// RunAuth runs the contract of state.AuthStore (tokens and the audit log)
// against stores from open, one fresh and empty store per test.
func RunAuth(t *testing.T, open func(t *testing.T) state.AuthStore) {
	t.Helper()
	t.Run("a token is stored with its hash and listed by name", func(t *testing.T) { testTokens(t, open(t)) })
	t.Run("a revoked token stays listed and its name may be taken again", func(t *testing.T) { testRevoke(t, open(t)) })
	t.Run("a token keeps its expiry and its last use, which only moves forward", func(t *testing.T) { testTokenUse(t, open(t)) })
	t.Run("audit records get increasing sequence numbers and survive as written", func(t *testing.T) { testAudit(t, open(t)) })
	t.Run("pruning deletes only records older than the bound", func(t *testing.T) { testPruneAudit(t, open(t)) })
}

var at0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func testTokens(t *testing.T, s state.AuthStore) {
	ctx := context.Background()
	toks, err := s.Tokens(ctx)
	must(t, err)
	if len(toks) != 0 {
		t.Fatalf("a new store has tokens: %+v", toks)
	}
	b := state.Token{Name: "bot", Hash: "bb", Roles: []string{"operator"}, Playbooks: []string{"nks-*"}, CreatedAt: at0, CreatedBy: "root"}
	a := state.Token{Name: "alice", Hash: "aa", Roles: []string{"viewer", "approver"}, CreatedAt: at0}
	must(t, s.CreateToken(ctx, b))
	must(t, s.CreateToken(ctx, a))
	if err := s.CreateToken(ctx, state.Token{Name: "bot", Hash: "cc", Roles: []string{"admin"}}); !errors.Is(err, state.ErrExists) {
		t.Fatalf("CreateToken of a live name: got %v, want ErrExists", err)
	}
	toks, err = s.Tokens(ctx)
	must(t, err)
	if len(toks) != 2 || toks[0].Name != "alice" || toks[1].Name != "bot" {
		t.Fatalf("tokens: got %+v, want alice then bot", toks)
	}
	got := toks[1]
	if got.Hash != "bb" || len(got.Roles) != 1 || got.Roles[0] != "operator" || len(got.Playbooks) != 1 ||
		got.Playbooks[0] != "nks-*" || !got.CreatedAt.Equal(at0) || got.CreatedBy != "root" || !got.RevokedAt.IsZero() {
		t.Fatalf("token bot: got %+v, want %+v (the second create must not have replaced it)", got, b)
	}
}

func testRevoke(t *testing.T, s state.AuthStore) {
	ctx := context.Background()
	if err := s.RevokeToken(ctx, "nobody", at0, "root"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("revoke of no token: got %v, want ErrNotFound", err)
	}
	must(t, s.CreateToken(ctx, state.Token{Name: "bot", Hash: "bb", Roles: []string{"operator"}, CreatedAt: at0}))
	must(t, s.RevokeToken(ctx, "bot", at0.Add(time.Hour), "root"))
	if err := s.RevokeToken(ctx, "bot", at0.Add(2*time.Hour), "root"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("second revoke: got %v, want ErrNotFound", err)
	}
	toks, err := s.Tokens(ctx)
	must(t, err)
	if len(toks) != 1 || !toks[0].RevokedAt.Equal(at0.Add(time.Hour)) || toks[0].RevokedBy != "root" {
		t.Fatalf("revoked token: got %+v", toks)
	}
	must(t, s.CreateToken(ctx, state.Token{Name: "bot", Hash: "b2", Roles: []string{"viewer"}, CreatedAt: at0.Add(3 * time.Hour)}))
	toks, err = s.Tokens(ctx)
	must(t, err)
	if len(toks) != 1 || toks[0].Hash != "b2" || !toks[0].RevokedAt.IsZero() {
		t.Fatalf("token made again after revocation: got %+v", toks)
	}
}

func testTokenUse(t *testing.T, s state.AuthStore) {
	ctx := context.Background()
	if err := s.TouchToken(ctx, "nobody", at0); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("touch of no token: got %v, want ErrNotFound", err)
	}
	exp := at0.Add(90 * 24 * time.Hour)
	must(t, s.CreateToken(ctx, state.Token{Name: "ci", Hash: "cc", Roles: []string{"operator"}, CreatedAt: at0, ExpiresAt: exp}))
	must(t, s.TouchToken(ctx, "ci", at0.Add(time.Hour)))
	must(t, s.TouchToken(ctx, "ci", at0.Add(time.Minute))) // older: kept out
	toks, err := s.Tokens(ctx)
	must(t, err)
	if len(toks) != 1 || !toks[0].ExpiresAt.Equal(exp) || !toks[0].LastUsedAt.Equal(at0.Add(time.Hour)) || toks[0].Hash != "cc" {
		t.Fatalf("token ci: got %+v, want expiry %s and last use %s", toks, exp, at0.Add(time.Hour))
	}
	must(t, s.RevokeToken(ctx, "ci", at0.Add(2*time.Hour), "root"))
	if err := s.TouchToken(ctx, "ci", at0.Add(3*time.Hour)); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("touch of a revoked token: got %v, want ErrNotFound", err)
	}
}

func testAudit(t *testing.T, s state.AuthStore) {
	ctx := context.Background()
	recs, err := s.Audit(ctx, state.AuditFilter{})
	must(t, err)
	if len(recs) != 0 {
		t.Fatalf("a new store has audit records: %+v", recs)
	}
	must(t, s.AppendAudit(ctx,
		state.AuditRecord{Time: at0, Identity: "alice", Action: "run.start", Target: "pb", Result: "ok", Source: "10.0.0.1:5000"},
		state.AuditRecord{Time: at0.Add(time.Minute), Identity: "bob", Action: "run.approve", Target: "r1/gate", Result: "denied",
			Detail: map[string]any{"approved": true}}))
	must(t, s.AppendAudit(ctx, state.AuditRecord{Time: at0.Add(2 * time.Minute), Identity: "root", Action: "token.create", Target: "bot", Result: "ok"}))
	recs, err = s.Audit(ctx, state.AuditFilter{})
	must(t, err)
	if len(recs) != 3 {
		t.Fatalf("audit: got %d records, want 3", len(recs))
	}
	for i, r := range recs {
		if i > 0 && r.Seq <= recs[i-1].Seq {
			t.Fatalf("audit seq not increasing: %d after %d", r.Seq, recs[i-1].Seq)
		}
	}
	if r := recs[1]; r.Identity != "bob" || r.Action != "run.approve" || r.Target != "r1/gate" || r.Result != "denied" ||
		!r.Time.Equal(at0.Add(time.Minute)) || r.Detail["approved"] != true {
		t.Fatalf("audit record 2: got %+v", r)
	}
	if recs[0].Source != "10.0.0.1:5000" {
		t.Fatalf("audit source: got %q", recs[0].Source)
	}
	after, err := s.Audit(ctx, state.AuditFilter{After: recs[0].Seq, Limit: 1})
	must(t, err)
	if len(after) != 1 || after[0].Seq != recs[1].Seq {
		t.Fatalf("audit after %d limit 1: got %+v", recs[0].Seq, after)
	}
	since, err := s.Audit(ctx, state.AuditFilter{Since: at0.Add(90 * time.Second)})
	must(t, err)
	if len(since) != 1 || since[0].Action != "token.create" {
		t.Fatalf("audit since: got %+v", since)
	}
}

func testPruneAudit(t *testing.T, s state.AuthStore) {
	ctx := context.Background()
	for i := range 4 {
		must(t, s.AppendAudit(ctx, state.AuditRecord{Time: at0.Add(time.Duration(i) * time.Hour), Identity: "x", Action: "run.cancel", Result: "ok"}))
	}
	n, err := s.PruneAudit(ctx, at0.Add(2*time.Hour))
	must(t, err)
	if n != 2 {
		t.Fatalf("pruned %d, want 2", n)
	}
	recs, err := s.Audit(ctx, state.AuditFilter{})
	must(t, err)
	if len(recs) != 2 || !recs[0].Time.Equal(at0.Add(2*time.Hour)) {
		t.Fatalf("after prune: got %+v", recs)
	}
	must(t, s.AppendAudit(ctx, state.AuditRecord{Time: at0.Add(5 * time.Hour), Identity: "x", Action: "run.cancel", Result: "ok"}))
	recs, err = s.Audit(ctx, state.AuditFilter{})
	must(t, err)
	if len(recs) != 3 || recs[2].Seq <= recs[1].Seq {
		t.Fatalf("append after prune: got %+v", recs)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
