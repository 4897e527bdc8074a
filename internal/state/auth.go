package state

import (
	"context"
	"time"
)

// Token is an API token made by `runbook token create`. The token itself
// is never stored: Hash is its SHA-256 (hex).
type Token struct {
	Name      string    `json:"name"`
	Hash      string    `json:"hash"`
	Roles     []string  `json:"roles"`
	Playbooks []string  `json:"playbooks,omitempty"` // patterns limiting the roles
	CreatedAt time.Time `json:"created_at"`
	CreatedBy string    `json:"created_by,omitempty"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
	RevokedBy string    `json:"revoked_by,omitempty"`
	// ExpiresAt ends the token (zero: it does not expire); LastUsedAt is
	// when it last authenticated a request, written at most once a minute
	// per server (zero: never).
	ExpiresAt  time.Time `json:"expires_at,omitzero"`
	LastUsedAt time.Time `json:"last_used_at,omitzero"`
}

// Expired reports whether t has expired at now.
func (t *Token) Expired(now time.Time) bool { return !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt) }

// AuditRecord is one entry of the audit log: who did what to what, from
// where, and how it ended. It never holds a token or a token's hash.
type AuditRecord struct {
	Seq      uint64         `json:"seq"` // assigned by the store, from 1
	Time     time.Time      `json:"time"`
	Identity string         `json:"identity"`
	Action   string         `json:"action"` // run.start, run.approve, token.create, ...
	Target   string         `json:"target,omitempty"`
	Result   string         `json:"result"`           // ok, denied, or the error code
	Source   string         `json:"source,omitempty"` // the client's address
	Detail   map[string]any `json:"detail,omitempty"`
}

// AuditFilter selects audit records. Zero fields match everything.
type AuditFilter struct {
	Since time.Time // at or after
	After uint64    // Seq greater than
	Limit int       // 0: no limit
}

// AuthStore keeps API tokens and the audit log, a part of Store; the
// contract suite is statetest.RunAuth.
type AuthStore interface {
	// CreateToken stores t; ErrExists when a token that is not revoked
	// has its name (a revoked token's name may be taken again).
	CreateToken(ctx context.Context, t Token) error
	// Tokens returns every token, revoked ones included, by name.
	Tokens(ctx context.Context) ([]Token, error)
	// RevokeToken marks the live token name revoked at at by by;
	// ErrNotFound when there is no live token of that name.
	RevokeToken(ctx context.Context, name string, at time.Time, by string) error
	// TouchToken records that the live token name authenticated a request
	// at at (kept when later than the recorded time); ErrNotFound when
	// there is no live token of that name.
	TouchToken(ctx context.Context, name string, at time.Time) error

	// AppendAudit appends records, assigning Seq (and Time when zero).
	AppendAudit(ctx context.Context, recs ...AuditRecord) error
	// Audit returns records oldest first.
	Audit(ctx context.Context, f AuditFilter) ([]AuditRecord, error)
	// PruneAudit deletes the records older than before and returns how
	// many. Nothing else ever deletes one.
	PruneAudit(ctx context.Context, before time.Time) (int, error)
}

// ApprovalAnswer is one answer to an approval step: who, with which
// roles, when, and what they said.
type ApprovalAnswer struct {
	By       string         `json:"by"`
	Roles    []string       `json:"roles,omitempty"`
	Approved bool           `json:"approved"`
	Comment  string         `json:"comment,omitempty"`
	Fields   map[string]any `json:"fields,omitempty"`
	At       time.Time      `json:"at"`
}

// RerunOf is the run r runs again when it is a rerun (its trigger's
// "rerun_of": a rerun is a start, recorded with what started it), "" for
// any other run.
func (r *Run) RerunOf() string {
	id, _ := r.Trigger["rerun_of"].(string)
	return id
}

// StartedBy is who started r: the API caller (or whoever retried it or
// ran it again),
// "webhook:ROUTE" or "schedule:CRON" for a triggered run, the user of the
// CLI, or "" when the run does not say.
func (r *Run) StartedBy() string {
	t := r.Trigger
	for _, k := range []string{"retried_by", "rerun_by"} {
		if s, _ := t[k].(string); s != "" {
			return s
		}
	}
	if s, _ := t["by"].(string); s != "" {
		return s
	}
	switch t["type"] {
	case "webhook":
		route, _ := t["route"].(string)
		return "webhook:" + route
	case "schedule":
		cron, _ := t["cron"].(string)
		return "schedule:" + cron
	}
	return ""
}
