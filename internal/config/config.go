package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/egress"
	"github.com/runbook/runbook/internal/inventory"
	"github.com/runbook/runbook/internal/playbook"
)

// DefaultFile is the config file `runbook serve` and `runbook config check`
// read when none is given.
const DefaultFile = "runbook.yaml"

// Defaults of the fields.
const (
	DefaultPlaybooks      = "playbooks"
	DefaultListen         = "127.0.0.1:8088"
	DefaultTokenSecret    = "RUNBOOK_API_TOKEN"
	DefaultShutdownGrace  = 30 * time.Second
	DefaultMaxBody        = 1 << 20
	DefaultPretouch       = 32 << 20
	DefaultReloadInterval = 2 * time.Second
	DefaultDedupTTL       = 7 * 24 * time.Hour
)

// Limits checked on the fields.
const (
	MaxBodyLimit      = 16 << 20
	MaxPretouch       = 1 << 30
	MaxRunningLimit   = 1 << 20
	MinReloadInterval = 100 * time.Millisecond
	MinDedupTTL       = time.Minute
	// MinHTTPTimeout is the shortest of the listener's timeouts.
	MinHTTPTimeout = 100 * time.Millisecond
	// MaxConnsPerAddressLimit is the largest max_conns_per_address.
	MaxConnsPerAddressLimit = 1 << 16
	// MaxBytes is the largest config file Load and Parse accept.
	MaxBytes = 1 << 20
)

// Config is a loaded, validated runbook.yaml with defaults filled in.
type Config struct {
	File      string // the file as given ("" for Default)
	Dir       string // absolute directory of File; relative paths resolve against it
	Playbooks string // absolute playbook directory
	State     string // absolute state file or a postgres:// DSN (no password), "" for the CLI's rule
	// StatePasswordSecret names the secret holding the database password
	// of a DSN State (see StateDSN).
	StatePasswordSecret string
	SecretsFile         string // absolute secrets file, "" for none
	Server              Server
	// HTTP is the destination policy of the requests playbooks aim
	// (http.request, notice.digest): http: {allow, deny}.
	HTTP     egress.Policy
	Webhooks Webhooks
	// Connections holds default settings per connection name; a string
	// value may be exactly `${{ secrets.NAME }}` (see ResolveConnections).
	Connections map[string]map[string]any
	Schedules   bool      // fire schedule triggers
	Retention   Retention // runs serve deletes daily (retention.go)
	Auth        Auth      // users, OIDC, audit retention (auth.go)
	// Notifications are the channels and rules of notifications:
	// (notify.go).
	Notifications Notifications
	// Hosts is the inventory of hosts: by name (hosts.go), which the ssh
	// step and the hosts() expression function reach through connections
	// (ResolveConnections).
	Hosts map[string]inventory.Host
}

// MinLease and MaxLease bound server.lease.
const MinLease, MaxLease = time.Second, time.Hour

// Server holds the settings of `runbook serve`'s HTTP server.
type Server struct {
	Listen        string        // host:port
	TokenSecret   string        // name of the secret holding the API bearer token
	ShutdownGrace time.Duration // how long in-flight work may take to stop
	// DrainGrace is how long the runs executing may take to end once a
	// drain began (SIGUSR1) before they are suspended. 0 (unset): 10m.
	DrainGrace     time.Duration
	MaxBody        int64         // webhook body cap in bytes
	Reload         bool          // poll the playbook directory for changes
	ReloadInterval time.Duration // how often
	// MaxRunning bounds the runs executing at once; more wait, committed,
	// in a queue. 0 (unset): sized to the machine by the server, 64 ×
	// GOMAXPROCS.
	MaxRunning int
	// Lease is how long a replica's lease on itself and its runs lasts
	// without renewal, when the state is PostgreSQL shared by several
	// servers (docs/ha.md). 0 (unset): 10 s.
	Lease time.Duration
	// TakeOverRunProcesses lets the replicas take over the unfinished runs
	// of a `runbook run` process whose lease lapsed (it died), as they do
	// a dead replica's. Off by default: such a run's secret inputs and
	// files may exist only where it ran.
	TakeOverRunProcesses bool
	// The HTTP listener's limits (server.Limits); 0 (unset) takes the
	// server's default: read_header_timeout 10s, read_timeout 30s (the
	// whole request, body included), write_timeout 60s (the followed log
	// streams lift it), idle_timeout 2m, max_conns_per_address 256.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	MaxConnsPerAddress                                        int
	// TLSCert and TLSKey are server.tls's PEM files (absolute; "" for
	// plain HTTP): the listener speaks HTTPS, TLS 1.2 at least.
	TLSCert, TLSKey string
	// MetricsTokenSecret names the secret holding the bearer token that
	// /metrics asks for ("": /metrics is open).
	MetricsTokenSecret string
	// PublicURL is the address people reach the UI at (server.public_url,
	// without a trailing slash): the base of the run links notifications
	// carry. "": the listen address.
	PublicURL string

	// Pretouch is how much heap serve makes resident before it listens,
	// in bytes (0: none; see pretouchHeap in cmd/runbook).
	Pretouch int64
}

// Webhooks holds the webhook intake settings.
type Webhooks struct {
	DedupTTL time.Duration    // how long a delivery ID is remembered
	Routes   map[string]Route // by route name: POST /hooks/{name}
}

// Route is one webhook route.
type Route struct {
	// Verify is "" (the shared-secret envelope of the messaging service)
	// or VerifyStandard (Standard Webhooks).
	Verify  string
	Secret  string   // name of the secret holding the signature value (or whsec_ secret)
	Secrets []string // names of more secrets accepted (a rotation)
}

// Webhook route verification modes (the route's verify key).
const (
	VerifyShared   = "shared-secret"
	VerifyStandard = "standard-webhooks"
)

// VerifyModes lists the modes a route's verify accepts.
var VerifyModes = []string{VerifyShared, VerifyStandard}

// Services lists the connection names the config accepts, each also with
// a suffix after - or _ (a second nks connection: nks-kr2).
var Services = []string{"easymaker", "helpcenter", "identity", "logncrash", "nks", "objectstorage"}

// Default returns the config used when there is no file, with relative
// paths resolved against dir ("" for the working directory).
func Default(dir string) *Config {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return &Config{
		Dir:       dir,
		Playbooks: filepath.Join(dir, DefaultPlaybooks),
		Server: Server{
			Listen:         DefaultListen,
			TokenSecret:    DefaultTokenSecret,
			ShutdownGrace:  DefaultShutdownGrace,
			MaxBody:        DefaultMaxBody,
			Pretouch:       DefaultPretouch,
			Reload:         true,
			ReloadInterval: DefaultReloadInterval,
		},
		Webhooks:    Webhooks{DedupTTL: DefaultDedupTTL, Routes: map[string]Route{}},
		Connections: map[string]map[string]any{},
		Hosts:       map[string]inventory.Host{},
		Schedules:   true,
		Notifications: Notifications{
			Channels: map[string]Channel{}, Backoff: DefaultNotifyBackoff,
			MaxBackoff: DefaultNotifyMaxBackoff, SendTimeout: DefaultNotifySendTimeout,
		},
	}
}

// Load reads and parses the config file at path. A missing file is an
// error wrapping fs.ErrNotExist; an invalid one is playbook.Diagnostics.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("config file %s does not exist: %w", path, fs.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("load config %s: %w", path, err)
	}
	return Parse(path, src)
}

// Parse parses and validates a config. file names the source in positions
// and is the base of relative paths. Every problem found is returned
// together as playbook.Diagnostics, sorted by position.
func Parse(file string, src []byte) (*Config, error) {
	dir := "."
	if file != "" {
		dir = filepath.Dir(file)
	}
	c := Default(dir)
	c.File = file
	l := newLoader(file, src)
	l.parse(c)
	if len(l.diags) > 0 {
		return nil, sortDiagnostics(l.diags)
	}
	return c, nil
}

// resolve makes p absolute against the config's directory.
func (c *Config) resolve(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(c.Dir, p)
}

// SecretRefs lists every secret name the config references (the API
// token, webhook route secrets, connection settings), sorted and unique.
func (c *Config) SecretRefs() []string {
	set := map[string]bool{}
	if c.Server.MetricsTokenSecret != "" {
		set[c.Server.MetricsTokenSecret] = true
	}
	if c.Server.TokenSecret != "" {
		set[c.Server.TokenSecret] = true
	}
	if c.StatePasswordSecret != "" {
		set[c.StatePasswordSecret] = true
	}
	for _, r := range c.Webhooks.Routes {
		for _, name := range append([]string{r.Secret}, r.Secrets...) {
			if name != "" {
				set[name] = true
			}
		}
	}
	for _, u := range c.NotificationSecrets() {
		set[u.Name] = true
	}
	for _, name := range c.hostSecrets() {
		set[name] = true
	}
	for _, settings := range c.Connections {
		walkStrings(settings, "", func(_, s string) {
			if name, ok := secretRef(s); ok {
				set[name] = true
			}
		})
	}
	return slices.Sorted(maps.Keys(set))
}

// ResolveConnections returns a copy of Connections with every
// `${{ secrets.NAME }}` replaced by the secret's value from lookup, and
// the inventory of hosts: as connections (inventory.Connection, the
// listing hosts() reads; inventory.ConnectionName(NAME), each host with
// its credentials, which the ssh step reads). A secret that is not set is
// an error naming it and where it is used ("connections.nks.token: secret
// NKS_TOKEN is not set"; several are joined with "; "); callers add the
// file name.
func (c *Config) ResolveConnections(lookup func(string) (string, bool)) (map[string]map[string]any, error) {
	out, missing := c.hostConnections(lookup)
	for _, name := range slices.Sorted(maps.Keys(c.Connections)) {
		path := "connections." + name
		settings := resolveValue(c.Connections[name], path, lookup, &missing).(map[string]any)
		out[name] = settings
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, errors.New(strings.Join(missing, "; "))
	}
	return out, nil
}

func resolveValue(v any, path string, lookup func(string) (string, bool), missing *[]string) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, x := range v {
			m[k] = resolveValue(x, path+"."+k, lookup, missing)
		}
		return m
	case string:
		name, ok := secretRef(v)
		if !ok {
			return v
		}
		val, set := lookup(name)
		if !set {
			*missing = append(*missing, fmt.Sprintf("%s: secret %s is not set", path, name))
			return ""
		}
		return val
	}
	return v
}

// walkStrings calls fn for every string under v with its dotted path.
func walkStrings(v any, path string, fn func(path, s string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			walkStrings(x, path+"."+k, fn)
		}
	case string:
		fn(path, v)
	}
}

// sortDiagnostics orders ds by line and column, keeping the order of
// discovery for equal positions, and drops exact duplicates.
func sortDiagnostics(ds playbook.Diagnostics) playbook.Diagnostics {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i].Pos, ds[j].Pos
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
	out := ds[:0]
	seen := map[playbook.Diagnostic]bool{}
	for _, d := range ds {
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}
