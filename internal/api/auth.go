package api

import (
	"time"

	"github.com/runbook/runbook/internal/state"
)

// Whoami is GET /api/v1/whoami: the caller's identity and what it may do.
type Whoami struct {
	Name        string   `json:"name"`
	Kind        string   `json:"kind"` // user, token, oidc, server
	Roles       []string `json:"roles"`
	Playbooks   []string `json:"playbooks,omitempty"` // patterns limiting the roles
	Permissions []string `json:"permissions"`
}

// TokenRequest is the body of POST /api/v1/tokens.
type TokenRequest struct {
	Name      string   `json:"name"`
	Roles     []string `json:"roles"`
	Playbooks []string `json:"playbooks,omitempty"`
	// TTL ends the token after this long ("90d", "12h"); "" never.
	TTL string `json:"ttl,omitempty"`
}

// Token describes a token made by POST /api/v1/tokens. It never holds the
// token's hash.
type Token struct {
	Name      string    `json:"name"`
	Roles     []string  `json:"roles"`
	Playbooks []string  `json:"playbooks,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	CreatedBy string    `json:"created_by,omitempty"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
	RevokedBy string    `json:"revoked_by,omitempty"`
	// ExpiresAt is when it stops working (absent: never); LastUsedAt when
	// it last authenticated a request, within a minute (absent: never).
	ExpiresAt  time.Time `json:"expires_at,omitzero"`
	LastUsedAt time.Time `json:"last_used_at,omitzero"`
}

// ViewToken is the description of a stored token: all of it but its hash.
func ViewToken(t state.Token) Token {
	return Token{Name: t.Name, Roles: t.Roles, Playbooks: t.Playbooks, CreatedAt: t.CreatedAt, CreatedBy: t.CreatedBy,
		RevokedAt: t.RevokedAt, RevokedBy: t.RevokedBy, ExpiresAt: t.ExpiresAt, LastUsedAt: t.LastUsedAt}
}

// TokenCreated is the answer of POST /api/v1/tokens: the only time the
// token is shown.
type TokenCreated struct {
	Token
	Secret string `json:"token"`
}

// TokenList is GET /api/v1/tokens.
type TokenList struct {
	Tokens []Token `json:"tokens"`
}

// AuditPage is GET /api/v1/audit: records oldest first; Next is the after
// of the next page (0: there is none).
type AuditPage struct {
	Records []state.AuditRecord `json:"records"`
	Next    uint64              `json:"next,omitempty"`
}
