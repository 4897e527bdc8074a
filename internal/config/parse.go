package config

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	yaml "go.yaml.in/yaml/v4"

	"github.com/runbook/runbook/internal/suggest"
	"github.com/runbook/runbook/internal/yamlnode"
)

var (
	topKeys    = []string{"playbooks", "state", "secrets_file", "server", "webhooks", "connections", "schedules", "retention", "auth", "http", "notifications", "hosts"}
	serverKeys = []string{"listen", "token_secret", "shutdown_grace", "drain_grace", "max_body", "pretouch", "reload", "reload_interval", "max_running", "lease", "take_over_run_processes",
		"read_header_timeout", "read_timeout", "write_timeout", "idle_timeout", "max_conns_per_address", "tls", "metrics_token", "public_url"}
	webhookKeys = []string{"dedup_ttl", "routes"}
	routeKeys   = []string{"verify", "secret", "secrets"}

	secretNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })
	routeNameRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`) })
	secretRefRE  = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^\$\{\{\s*secrets\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}$`)
	})
	hostnameRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$`)
	})
)

// secretRef returns NAME when s is exactly `${{ secrets.NAME }}`.
func secretRef(s string) (string, bool) {
	m := secretRefRE().FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return "", false
	}
	return m[1], true
}

// parse decodes the source into c, which holds the defaults.
func (l *loader) parse(c *Config) {
	if len(l.src) > MaxBytes {
		l.errf(nil, "", "config is larger than %d bytes", MaxBytes)
		return
	}
	root := l.parseYAML()
	if root == nil {
		return
	}
	o := yamlnode.Strict(l.errf, root, "", topKeys...)
	if o == nil {
		return
	}
	if n := o.Get("playbooks"); n != nil {
		if s, ok := l.nonEmpty(n, "playbooks"); ok {
			c.Playbooks = c.resolve(s)
		}
	}
	if n := o.Get("state"); n != nil {
		l.state(c, n)
	}
	if n := o.Get("secrets_file"); n != nil {
		if s, ok := l.nonEmpty(n, "secrets_file"); ok {
			c.SecretsFile = c.resolve(s)
		}
	}
	if n := o.Get("server"); n != nil {
		l.server(c, n)
	}
	if n := o.Get("webhooks"); n != nil {
		l.webhooks(&c.Webhooks, n)
	}
	if n := o.Get("connections"); n != nil {
		l.connections(c, n)
	}
	if n := o.Get("retention"); n != nil {
		l.retention(&c.Retention, n)
	}
	if n := o.Get("schedules"); n != nil {
		if b, ok := l.Bool(n, "schedules"); ok {
			c.Schedules = b
		}
	}
	if n := o.Get("auth"); n != nil {
		l.auth(&c.Auth, n)
	}
	if n := o.Get("http"); n != nil {
		l.egress(&c.HTTP, n)
	}
	if n := o.Get("notifications"); n != nil {
		l.notifications(c, n)
	}
	if n := o.Get("hosts"); n != nil {
		l.hosts(c, n)
	}
}

func (l *loader) server(c *Config, n *yaml.Node) {
	s := &c.Server
	o := yamlnode.Strict(l.errf, n, "server", serverKeys...)
	if o == nil {
		return
	}
	l.serverTLS(c, o.Get("tls"))
	if n := o.Get("listen"); n != nil {
		if v, ok := l.Str(n, "server.listen"); ok {
			if msg := checkListen(v); msg != "" {
				l.errf(n, "server.listen", "%s", msg)
			} else {
				s.Listen = v
			}
		}
	}
	if n := o.Get("token_secret"); n != nil {
		if v, ok := l.secretName(n, "server.token_secret"); ok {
			s.TokenSecret = v
		}
	}
	if n := o.Get("max_body"); n != nil {
		if v, ok := l.size(n, "server.max_body", 1, MaxBodyLimit); ok {
			s.MaxBody = v
		}
	}
	if n := o.Get("pretouch"); n != nil {
		if v, ok := l.size(n, "server.pretouch", 0, MaxPretouch); ok {
			s.Pretouch = v
		}
	}
	if n := o.Get("reload"); n != nil {
		if b, ok := l.Bool(n, "server.reload"); ok {
			s.Reload = b
		}
	}
	if n := o.Get("max_running"); n != nil {
		if v, ok := l.IntBetween(n, "server.max_running", 1, MaxRunningLimit); ok {
			s.MaxRunning = v
		}
	}
	if n := o.Get("lease"); n != nil {
		if d, ok := l.duration(n, "server.lease", MinLease); ok {
			if d > MaxLease {
				l.errf(n, "server.lease", "must be at most %s (got %s)", MaxLease, d)
			} else {
				s.Lease = d
			}
		}
	}
	if n := o.Get("take_over_run_processes"); n != nil {
		if b, ok := l.Bool(n, "server.take_over_run_processes"); ok {
			s.TakeOverRunProcesses = b
		}
	}
	for _, t := range []struct {
		key string
		d   *time.Duration
		lo  time.Duration
	}{{"shutdown_grace", &s.ShutdownGrace, 0}, {"drain_grace", &s.DrainGrace, 0},
		{"reload_interval", &s.ReloadInterval, MinReloadInterval},
		{"read_header_timeout", &s.ReadHeaderTimeout, MinHTTPTimeout}, {"read_timeout", &s.ReadTimeout, MinHTTPTimeout},
		{"write_timeout", &s.WriteTimeout, MinHTTPTimeout}, {"idle_timeout", &s.IdleTimeout, MinHTTPTimeout}} {
		if n := o.Get(t.key); n != nil {
			if v, ok := l.duration(n, "server."+t.key, t.lo); ok {
				*t.d = v
			}
		}
	}
	if n := o.Get("metrics_token"); n != nil {
		if v, ok := l.secretName(n, "server.metrics_token"); ok {
			s.MetricsTokenSecret = v
		}
	}
	l.publicURL(s, o.Get("public_url"))
	if n := o.Get("max_conns_per_address"); n != nil {
		if v, ok := l.IntBetween(n, "server.max_conns_per_address", 1, MaxConnsPerAddressLimit); ok {
			s.MaxConnsPerAddress = v
		}
	}
}

// publicURL reads server.public_url, the base of the UI links that
// notifications carry.
func (l *loader) publicURL(s *Server, n *yaml.Node) {
	if n == nil {
		return
	}
	v, ok := l.nonEmpty(n, "server.public_url")
	if !ok {
		return
	}
	if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		l.errf(n, "server.public_url", "must be an http:// or https:// URL without query (got %q); e.g. https://runbook.example.com", v)
		return
	}
	s.PublicURL = strings.TrimRight(v, "/")
}

// checkListen returns why addr is not a usable host:port, or "".
func checkListen(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "invalid address " + strconv.Quote(addr) + ": want host:port, e.g. 127.0.0.1:8088 (0.0.0.0:8088 listens on every interface)"
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 || strings.TrimSpace(port) != port {
		return "invalid port " + strconv.Quote(port) + ": must be a number between 0 and 65535"
	}
	if host == "" {
		return ""
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return ""
	}
	if !hostnameRE().MatchString(host) || len(host) > 253 {
		return "invalid host " + strconv.Quote(host) + ": want an IP address or a host name"
	}
	return ""
}

// secretName decodes the name of a secret.
func (l *loader) secretName(n *yaml.Node, path string) (string, bool) {
	s, ok := l.Str(n, path)
	if !ok {
		return "", false
	}
	if name, isRef := secretRef(s); isRef {
		l.errf(n, path, "give the secret's name, not a reference: %s", name)
		return "", false
	}
	if !secretNameRE().MatchString(s) {
		l.errf(n, path, "invalid secret name %q: use letters, digits and '_', not starting with a digit", s)
		return "", false
	}
	return s, true
}

func (l *loader) webhooks(w *Webhooks, n *yaml.Node) {
	o := yamlnode.Strict(l.errf, n, "webhooks", webhookKeys...)
	if o == nil {
		return
	}
	if n := o.Get("dedup_ttl"); n != nil {
		if d, ok := l.duration(n, "webhooks.dedup_ttl", MinDedupTTL); ok {
			w.DedupTTL = d
		}
	}
	rn := o.Get("routes")
	if rn == nil {
		return
	}
	routes := yamlnode.Mapping(l.errf, rn, "webhooks.routes")
	if routes == nil {
		return
	}
	for _, p := range routes.Pairs {
		path := yamlnode.KeyPath("webhooks.routes", p.Name)
		if !routeNameRE().MatchString(p.Name) {
			l.errf(p.Key, path, "invalid route name %q: use 1-64 lower-case letters, digits, '_' or '-', starting with a letter or digit", p.Name)
		}
		if yamlnode.IsNull(p.Val) {
			l.errf(p.Key, path, "secret is required (the name of the secret holding the webhook signature)")
			continue
		}
		if r, ok := l.route(p.Val, path); ok {
			w.Routes[p.Name] = r
		}
	}
}

// route decodes one webhook route: verify (a mode of VerifyModes), and
// secret and/or secrets (names; at least one). Secrets beyond the first
// are accepted as well (a rotation).
func (l *loader) route(n *yaml.Node, path string) (Route, bool) {
	ro := yamlnode.Strict(l.errf, n, path, routeKeys...)
	if ro == nil {
		return Route{}, false
	}
	var r Route
	ok := true
	if vn := ro.Get("verify"); vn != nil {
		if v, isStr := l.Str(vn, path+".verify"); !isStr {
			ok = false
		} else if !slices.Contains(VerifyModes, v) {
			l.errf(vn, path+".verify", "unknown verify mode %q (want one of %s)%s", v, strings.Join(VerifyModes, ", "), suggest.Hint(v, VerifyModes))
			ok = false
		} else if v != VerifyShared {
			r.Verify = v
		}
	}
	var names []string
	if sn := ro.Get("secret"); sn != nil {
		if s, sok := l.secretName(sn, path+".secret"); sok {
			names = append(names, s)
		} else {
			ok = false
		}
	}
	if ln := ro.Get("secrets"); ln != nil {
		sp := path + ".secrets"
		if d := yamlnode.Deref(ln); d == nil || d.Kind != yaml.SequenceNode || len(d.Content) == 0 {
			l.errf(ln, sp, "must be a non-empty list of secret names (got %s)", yamlnode.KindWord(ln))
			ok = false
		} else {
			for i, it := range d.Content {
				if s, sok := l.secretName(it, fmt.Sprintf("%s[%d]", sp, i)); sok {
					names = append(names, s)
				} else {
					ok = false
				}
			}
		}
	}
	if ro.Get("secret") == nil && ro.Get("secrets") == nil {
		l.errf(ro.Node, path, "secret is required (the name of the secret holding the webhook signature)")
		return Route{}, false
	}
	if !ok || len(names) == 0 {
		return Route{}, false
	}
	r.Secret, r.Secrets = names[0], names[1:]
	if len(r.Secrets) == 0 {
		r.Secrets = nil
	}
	return r, true
}

// knownConnection reports whether name is a service's connection or a
// named variant of one ("nks-kr2", "easymaker_prod"), as steps name theirs
// with a `connection` param.
func knownConnection(name string) bool {
	for _, svc := range Services {
		if name == svc || (strings.HasPrefix(name, svc) && len(name) > len(svc)+1 && strings.ContainsRune("-_", rune(name[len(svc)]))) {
			return true
		}
	}
	return false
}

func (l *loader) connections(c *Config, n *yaml.Node) {
	m := yamlnode.Mapping(l.errf, n, "connections")
	if m == nil {
		return
	}
	for _, p := range m.Pairs {
		path := yamlnode.KeyPath("connections", p.Name)
		if !knownConnection(p.Name) {
			hint := suggest.Hint(p.Name, Services)
			if hint == "" {
				hint = "; known: " + strings.Join(Services, ", ") + ", or one of them with a suffix (nks-kr2)"
			}
			l.errf(p.Key, path, "unknown connection %q%s", p.Name, hint)
		}
		if yamlnode.IsNull(p.Val) {
			c.Connections[p.Name] = map[string]any{}
			continue
		}
		if yamlnode.Deref(p.Val).Kind != yaml.MappingNode {
			l.errf(p.Val, path, "must be a mapping of settings (got %s)", yamlnode.KindWord(p.Val))
			continue
		}
		v, ok := l.value(p.Val, path, 1)
		if ok {
			c.Connections[p.Name] = v.(map[string]any)
		}
	}
}
