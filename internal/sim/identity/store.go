package identity

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"sync"
	"time"
	"weak"

	"github.com/runbook/runbook/internal/sim"
)

// DefaultLifetime is how long an issued token stays valid, in simulated time.
const DefaultLifetime = 12 * time.Hour

// Credentials the simulator accepts.
type Credentials struct {
	TenantID string
	Username string
	Password string // the API password
}

// Store holds the tokens issued for one simulator server.
type Store struct {
	clock *sim.Clock
	creds Credentials

	mu       sync.Mutex
	lifetime time.Duration
	tokens   map[string]time.Time // id -> expiry (simulated)
	issued   int
	seed     uint64
}

var (
	storesMu sync.Mutex
	stores   = map[weak.Pointer[sim.Env]]*Store{}
)

// For returns the token store of env's server, creating it on first use.
// The identity service and every service that checks tokens share it.
func For(env *sim.Env) *Store {
	key := weak.Make(env)
	storesMu.Lock()
	defer storesMu.Unlock()
	if s, ok := stores[key]; ok {
		return s
	}
	s := &Store{
		clock:    env.Clock,
		creds:    DefaultCredentials(env.Seed),
		lifetime: DefaultLifetime,
		tokens:   map[string]time.Time{},
		seed:     env.Seed,
	}
	stores[key] = s
	runtime.AddCleanup(env, func(k weak.Pointer[sim.Env]) {
		storesMu.Lock()
		defer storesMu.Unlock()
		delete(stores, k)
	}, key)
	return s
}

// DefaultCredentials are the tenant, user and API password the simulator
// accepts for a seed.
func DefaultCredentials(seed uint64) Credentials {
	return Credentials{
		TenantID: fmt.Sprintf("%016x%016x", seed*0x9e3779b97f4a7c15, (seed+1)*0xbf58476d1ce4e5b9),
		Username: "sim-user@example.com",
		Password: "sim-api-password",
	}
}

// Credentials returns the accepted credentials.
func (s *Store) Credentials() Credentials { return s.creds }

// SetLifetime changes the lifetime of tokens issued from now on.
func (s *Store) SetLifetime(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lifetime = d
}

// Issue checks the credentials and returns a new token and its expiry.
func (s *Store) Issue(c Credentials) (id string, expires time.Time, ok bool) {
	if c != s.creds {
		return "", time.Time{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.issued++
	sum := sha256.Sum256(fmt.Appendf(nil, "%d/%d/%s", s.seed, s.issued, c.Username))
	id = "gAAAA" + hex.EncodeToString(sum[:])
	expires = s.clock.Now().Add(s.lifetime).UTC().Truncate(time.Second)
	s.tokens[id] = expires
	return id, expires, true
}

// Valid reports whether token was issued here and has not expired or been
// revoked.
func (s *Store) Valid(token string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.tokens[token]
	return ok && s.clock.Now().Before(exp)
}

// Revoke invalidates every issued token.
func (s *Store) Revoke() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.tokens)
}
