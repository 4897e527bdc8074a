package inventory

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Connection is the connection whose settings list every host of the
// inventory by name, public fields only (Public): what hosts() reads.
const Connection = "hosts"

// Prefix starts the connection name of one host (ConnectionName).
const Prefix = "host:"

// ConnectionName is the connection holding host name's settings with its
// credentials: what the ssh step reads.
func ConnectionName(name string) string { return Prefix + name }

// Reserved reports whether a connection name belongs to the inventory, so
// that a playbook's connections: may not set it.
func Reserved(name string) bool { return name == Connection || strings.HasPrefix(name, Prefix) }

// NameRE is the form of a host's name, compiled on first use: its
// bounded repetition makes a program of some 900 allocations, which
// every process would otherwise pay at start-up (docs/performance.md).
var NameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`) })

// Host is one host of the inventory.
type Host struct {
	Name    string
	Address string // host or host:port (port 22 when absent)
	User    string
	Labels  map[string]string
	// HostKey pins the host's key ("ssh-ed25519 AAAA…"); KnownHosts is an
	// absolute known_hosts file. One of them is set: a host's key is
	// always verified.
	HostKey    string
	KnownHosts string
	// The names of the secrets holding a private key (PEM or OpenSSH),
	// its passphrase, and a password.
	PrivateKeySecret, PassphraseSecret, PasswordSecret string
	// Agent lets the ssh-agent of SSH_AUTH_SOCK sign.
	Agent bool
	// Jump names the host of the inventory connections go through.
	Jump string
}

// Public is what hosts() returns of h: name, address, user and labels.
func (h Host) Public() map[string]any {
	labels := make(map[string]any, len(h.Labels))
	for k, v := range h.Labels {
		labels[k] = v
	}
	return map[string]any{"name": h.Name, "address": h.Address, "user": h.User, "labels": labels}
}

// Settings returns h's connection settings with its credentials, each
// secret's value from lookup. A secret that is not set is reported by
// the field naming it ("private_key_secret: secret SSH_KEY is not set").
func (h Host) Settings(lookup func(string) (string, bool)) (map[string]any, []string) {
	out := map[string]any{"name": h.Name, "address": h.Address, "user": h.User,
		"host_key": h.HostKey, "known_hosts": h.KnownHosts, "agent": h.Agent, "jump": h.Jump}
	var missing []string
	for _, s := range []struct{ field, secret, key string }{
		{"private_key_secret", h.PrivateKeySecret, "private_key"},
		{"passphrase_secret", h.PassphraseSecret, "passphrase"},
		{"password_secret", h.PasswordSecret, "password"},
	} {
		if s.secret == "" {
			continue
		}
		v, ok := lookup(s.secret)
		if !ok {
			missing = append(missing, fmt.Sprintf("%s: secret %s is not set", s.field, s.secret))
			continue
		}
		out[s.key] = v
	}
	return out, missing
}

// Login is a host as the ssh step uses it: Host's fields with the
// credentials' values.
type Login struct {
	Host
	PrivateKey, Passphrase, Password string
}

// FromSettings reads the settings Settings made (a host:NAME connection).
func FromSettings(m map[string]any) Login {
	str := func(k string) string { s, _ := m[k].(string); return s }
	agent, _ := m["agent"].(bool)
	return Login{
		Host: Host{Name: str("name"), Address: str("address"), User: str("user"), HostKey: str("host_key"),
			KnownHosts: str("known_hosts"), Agent: agent, Jump: str("jump")},
		PrivateKey: str("private_key"), Passphrase: str("passphrase"), Password: str("password"),
	}
}

// Listing is the settings of Connection: each host's Public fields by name.
func Listing(hosts map[string]Host) map[string]any {
	out := make(map[string]any, len(hosts))
	for name, h := range hosts {
		out[name] = h.Public()
	}
	return out
}

// Selector matches hosts by their labels: every pair must match.
type Selector map[string]string

// ParseSelector reads "k=v[,k=v]"; "*" or "" selects every host.
func ParseSelector(s string) (Selector, error) {
	s = strings.TrimSpace(s)
	sel := Selector{}
	if s == "" || s == "*" {
		return sel, nil
	}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return nil, fmt.Errorf("selector %q: want label=value pairs separated by commas (role=web,env=prod), or * for every host", s)
		}
		if prev, dup := sel[k]; dup && prev != v {
			return nil, fmt.Errorf("selector %q: label %s is given twice", s, k)
		}
		sel[k] = v
	}
	return sel, nil
}

// Match reports whether labels hold every pair of s.
func (s Selector) Match(labels map[string]string) bool {
	for k, v := range s {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Select returns the hosts of a Listing whose labels match selector, by
// name, as hosts() gives them to expressions.
func Select(listing map[string]any, selector string) ([]any, error) {
	sel, err := ParseSelector(selector)
	if err != nil {
		return nil, err
	}
	out := []any{}
	for _, name := range slices.Sorted(maps.Keys(listing)) {
		h, _ := listing[name].(map[string]any)
		if h == nil {
			continue
		}
		if sel.Match(labelsOf(h["labels"])) {
			out = append(out, h)
		}
	}
	return out, nil
}

func labelsOf(v any) map[string]string {
	out := map[string]string{}
	switch m := v.(type) {
	case map[string]any:
		for k, x := range m {
			out[k] = fmt.Sprint(x)
		}
	case map[string]string:
		return m
	}
	return out
}

// Names returns the names of hosts, sorted.
func Names(hosts map[string]Host) []string {
	names := make([]string, 0, len(hosts))
	for n := range hosts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
