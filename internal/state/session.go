package state

import (
	"context"
	"time"
)

// Session is a signed-in browser of the web UI. It holds no secret: Key is
// the SHA-256 (hex) of the random session ID in the browser's cookie, and
// a session of an API token holds the token's SHA-256, never the token.
type Session struct {
	Key string `json:"key"`
	// Kind is what the identity is checked against: "token" (TokenHash
	// is looked up as the API looks up a bearer token's hash) or "oidc"
	// (Name and Roles as the issuer's ID token gave them at sign-in).
	Kind      string   `json:"kind"`
	TokenHash string   `json:"token_hash,omitempty"`
	Name      string   `json:"name,omitempty"`
	Roles     []string `json:"roles,omitempty"`
	// Created is the sign-in, Seen the last request (written at most once
	// a minute), Expires when the session ends unless seen again.
	Created time.Time `json:"created"`
	Seen    time.Time `json:"seen"`
	Expires time.Time `json:"expires"`
}

// SessionStore keeps the web UI's sessions, so that they survive a restart
// and every replica over one store knows them. It is a part of Store; the
// contract suite is statetest.RunSessions.
type SessionStore interface {
	// PutSession stores s under s.Key, replacing a session of that key.
	PutSession(ctx context.Context, s Session) error
	// Session returns the session of key, ErrNotFound when there is none
	// (an expired session not yet pruned is returned: the caller judges).
	Session(ctx context.Context, key string) (Session, error)
	// DeleteSession deletes the session of key; none is not an error.
	DeleteSession(ctx context.Context, key string) error
	// PruneSessions deletes the sessions that expire before before and
	// returns how many.
	PruneSessions(ctx context.Context, before time.Time) (int, error)
}
