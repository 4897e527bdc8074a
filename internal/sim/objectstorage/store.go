package objectstorage

import (
	"crypto/md5"
	"encoding/hex"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
	"weak"

	"github.com/runbook/runbook/internal/sim"
)

// Object is one stored object.
type Object struct {
	Data         []byte
	ContentType  string
	ETag         string // hex MD5 of Data
	LastModified time.Time
}

type container struct {
	created time.Time
	objects map[string]*Object
}

// Store holds the accounts, containers and objects of one simulator
// server. The HTTP service and in-process users (the ML simulator reading
// datasets and writing models) share it. It is safe for concurrent use.
type Store struct {
	clock *sim.Clock

	mu       sync.Mutex
	accounts map[string]map[string]*container // account -> container -> ...
}

var (
	storesMu sync.Mutex
	stores   = map[weak.Pointer[sim.Env]]*Store{}
)

// For returns the store of env's server, creating it on first use.
func For(env *sim.Env) *Store {
	key := weak.Make(env)
	storesMu.Lock()
	defer storesMu.Unlock()
	if s, ok := stores[key]; ok {
		return s
	}
	s := &Store{clock: env.Clock, accounts: map[string]map[string]*container{}}
	stores[key] = s
	runtime.AddCleanup(env, func(k weak.Pointer[sim.Env]) {
		storesMu.Lock()
		defer storesMu.Unlock()
		delete(stores, k)
	}, key)
	return s
}

func (s *Store) now() time.Time {
	if s.clock == nil {
		return time.Now().UTC()
	}
	return s.clock.Now().UTC()
}

// account is "AUTH_<tenant>"; the "AUTH_" prefix is optional in the Go API.
func accountKey(account string) string {
	if strings.HasPrefix(account, "AUTH_") {
		return account
	}
	return "AUTH_" + account
}

// CreateContainer creates a container (no-op when it exists). It reports
// whether it was created.
func (s *Store) CreateContainer(account, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.createLocked(accountKey(account), name)
}

func (s *Store) createLocked(account, name string) bool {
	a := s.accounts[account]
	if a == nil {
		a = map[string]*container{}
		s.accounts[account] = a
	}
	if _, ok := a[name]; ok {
		return false
	}
	a[name] = &container{created: s.now(), objects: map[string]*Object{}}
	return true
}

// HasContainer reports whether the container exists.
func (s *Store) HasContainer(account, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.accounts[accountKey(account)][name]
	return ok
}

// Put stores an object, creating the container if needed (the HTTP API
// refuses a PUT into a missing container; in-process callers need not care).
// data is copied.
func (s *Store) Put(account, container, object string, data []byte, contentType string) {
	s.put(accountKey(account), container, object, append([]byte(nil), data...), contentType, true)
}

// put stores data (not copied). Without create it reports false when the
// container does not exist.
func (s *Store) put(account, cont, object string, data []byte, contentType string, create bool) (*Object, bool) {
	sum := md5.Sum(data)
	if contentType == "" {
		contentType = "application/octet-stream"
	}
	o := &Object{Data: data, ContentType: contentType, ETag: hex.EncodeToString(sum[:]), LastModified: s.now()}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.accounts[account][cont]
	if c == nil {
		if !create {
			return nil, false
		}
		s.createLocked(account, cont)
		c = s.accounts[account][cont]
	}
	c.objects[object] = o
	return o, true
}

// Get returns a copy of an object's data.
func (s *Store) Get(account, container, object string) ([]byte, bool) {
	o, ok := s.Stat(account, container, object)
	if !ok {
		return nil, false
	}
	return append([]byte(nil), o.Data...), true
}

// Stat returns an object (its Data must not be modified).
func (s *Store) Stat(account, container, object string) (Object, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.accounts[accountKey(account)][container].objectsOrNil()[object]
	if !ok {
		return Object{}, false
	}
	return *o, true
}

func (c *container) objectsOrNil() map[string]*Object {
	if c == nil {
		return nil
	}
	return c.objects
}

// Delete removes an object and reports whether it existed.
func (s *Store) Delete(account, container, object string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.accounts[accountKey(account)][container]
	if c == nil {
		return false
	}
	if _, ok := c.objects[object]; !ok {
		return false
	}
	delete(c.objects, object)
	return true
}

// List returns the names of the container's objects that start with
// prefix, sorted (nil for a missing container).
func (s *Store) List(account, container, prefix string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.accounts[accountKey(account)][container]
	if c == nil {
		return nil
	}
	out := make([]string, 0, len(c.objects))
	for name := range c.objects {
		if strings.HasPrefix(name, prefix) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}
