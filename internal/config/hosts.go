package config

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v4"
	xssh "golang.org/x/crypto/ssh"

	"github.com/runbook/runbook/internal/inventory"
	"github.com/runbook/runbook/internal/suggest"
	"github.com/runbook/runbook/internal/yamlnode"
)

var hostKeys = []string{"address", "user", "labels", "host_key", "known_hosts", "private_key_secret", "passphrase_secret", "password_secret", "agent", "jump"}

// hosts decodes hosts: (name -> host), the inventory the ssh step and
// hosts() read. Every host names how its key is verified and how it logs
// in; a jump names another host, without a cycle.
func (l *loader) hosts(c *Config, n *yaml.Node) {
	m := yamlnode.Mapping(l.errf, n, "hosts")
	if m == nil {
		return
	}
	jumps := map[string]*yaml.Node{}
	for _, p := range m.Pairs {
		path := yamlnode.KeyPath("hosts", p.Name)
		if !inventory.NameRE().MatchString(p.Name) {
			l.errf(p.Key, path, "invalid host name %q: use 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit", p.Name)
			continue
		}
		if yamlnode.IsNull(p.Val) {
			l.errf(p.Key, path, "address and user are required")
			continue
		}
		h, jump, ok := l.host(c, p.Val, path)
		if !ok {
			continue
		}
		h.Name = p.Name
		if h.Jump != "" {
			jumps[p.Name] = jump
		}
		c.Hosts[p.Name] = h
	}
	l.checkJumps(c.Hosts, jumps)
}

// host decodes one host; jump is the node of its jump, if any.
func (l *loader) host(c *Config, n *yaml.Node, path string) (h inventory.Host, jump *yaml.Node, ok bool) {
	o := yamlnode.Strict(l.errf, n, path, hostKeys...)
	if o == nil {
		return inventory.Host{}, nil, false
	}
	ok = true
	str := func(key string, required bool) string {
		vn := o.Get(key)
		if vn == nil {
			if required {
				l.errf(o.Node, path, "%s is required", key)
				ok = false
			}
			return ""
		}
		s, sok := l.nonEmpty(vn, path+"."+key)
		ok = ok && sok
		return s
	}
	secret := func(key string) string {
		vn := o.Get(key)
		if vn == nil {
			return ""
		}
		s, sok := l.secretName(vn, path+"."+key)
		ok = ok && sok
		return s
	}
	h.Address, h.User = str("address", true), str("user", true)
	if h.Address != "" {
		if msg := checkHostAddress(h.Address); msg != "" {
			l.errf(o.Get("address"), path+".address", "%s", msg)
			ok = false
		}
	}
	h.HostKey, h.KnownHosts, h.Jump = str("host_key", false), str("known_hosts", false), str("jump", false)
	h.PrivateKeySecret, h.PassphraseSecret, h.PasswordSecret = secret("private_key_secret"), secret("passphrase_secret"), secret("password_secret")
	if an := o.Get("agent"); an != nil {
		b, bok := l.Bool(an, path+".agent")
		h.Agent, ok = b, ok && bok
	}
	labels, lok := l.hostLabels(o.Get("labels"), path+".labels")
	h.Labels, ok = labels, ok && lok
	ok = l.hostKeyCheck(o, path, &h) && ok
	if h.PrivateKeySecret == "" && h.PasswordSecret == "" && !h.Agent && o.Get("private_key_secret") == nil && o.Get("password_secret") == nil {
		l.errf(o.Node, path, "give private_key_secret, password_secret or agent: true (how runbook logs in)")
		ok = false
	}
	if h.PassphraseSecret != "" && o.Get("private_key_secret") == nil {
		l.errf(o.Get("passphrase_secret"), path+".passphrase_secret", "goes with private_key_secret")
		ok = false
	}
	if h.KnownHosts != "" {
		h.KnownHosts = c.resolve(h.KnownHosts)
	}
	return h, o.Get("jump"), ok
}

// hostKeyCheck checks that a host says how its key is verified: one of
// host_key (a public key) and known_hosts.
func (l *loader) hostKeyCheck(o *yamlnode.Object, path string, h *inventory.Host) bool {
	switch {
	case o.Get("host_key") != nil && o.Get("known_hosts") != nil:
		l.errf(o.Get("known_hosts"), path+".known_hosts", "cannot be used with host_key; give one of them")
		return false
	case o.Get("host_key") == nil && o.Get("known_hosts") == nil:
		l.errf(o.Node, path, "give host_key (the host's public key, ssh-ed25519 AAAA…) or known_hosts (a file): a host's key is always verified")
		return false
	case h.HostKey != "":
		if _, _, _, _, err := xssh.ParseAuthorizedKey([]byte(h.HostKey)); err != nil {
			l.errf(o.Get("host_key"), path+".host_key", "is not a public key: want a type and its base64, as a known_hosts line has them after the name (ssh-ed25519 AAAA…)")
			return false
		}
	}
	return true
}

// hostLabels decodes labels: name -> string.
func (l *loader) hostLabels(n *yaml.Node, path string) (map[string]string, bool) {
	out := map[string]string{}
	if n == nil {
		return out, true
	}
	m := yamlnode.Mapping(l.errf, n, path)
	if m == nil {
		return out, false
	}
	ok := true
	for _, p := range m.Pairs {
		kp := yamlnode.KeyPath(path, p.Name)
		if p.Name == "" || strings.ContainsAny(p.Name, "=, ") {
			l.errf(p.Key, kp, "invalid label name %q: no '=', ',' or space (a selector is role=web,env=prod)", p.Name)
			ok = false
			continue
		}
		v, vok := l.Scalar(p.Val, kp)
		if !vok || v == nil {
			if vok {
				l.errf(p.Val, kp, "must be a string")
			}
			ok = false
			continue
		}
		s := fmt.Sprint(v)
		if strings.ContainsAny(s, ",") {
			l.errf(p.Val, kp, "a label's value cannot hold ',' (a selector is role=web,env=prod)")
			ok = false
			continue
		}
		out[p.Name] = s
	}
	return out, ok
}

// checkJumps checks that every jump names a host of the inventory and
// that no chain of jumps comes back to where it started.
func (l *loader) checkJumps(hosts map[string]inventory.Host, at map[string]*yaml.Node) {
	names := inventory.Names(hosts)
	for _, name := range slices.Sorted(maps.Keys(at)) {
		path := yamlnode.KeyPath("hosts", name) + ".jump"
		jump := hosts[name].Jump
		if _, ok := hosts[jump]; !ok {
			l.errf(at[name], path, "host %q is not in hosts%s", jump, suggest.Hint(jump, names))
			continue
		}
		seen := map[string]bool{name: true}
		for j := jump; j != ""; j = hosts[j].Jump {
			if seen[j] {
				l.errf(at[name], path, "jump hosts go round in a circle through %s", j)
				break
			}
			seen[j] = true
		}
	}
}

// checkHostAddress returns why addr is not a host or host:port, or "".
func checkHostAddress(addr string) string {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		msg := checkListen(addr)
		if strings.HasPrefix(msg, "invalid address") {
			msg = ""
		}
		if h, _, _ := net.SplitHostPort(addr); h == "" {
			return "invalid address " + fmt.Sprintf("%q", addr) + ": name the host (db1.example.com:2222)"
		}
		return msg
	}
	if msg := checkListen(net.JoinHostPort(strings.Trim(addr, "[]"), "22")); msg != "" {
		return msg
	}
	return ""
}

// hostSecrets lists the secret names the hosts reference.
func (c *Config) hostSecrets() []string {
	var out []string
	for _, h := range c.Hosts {
		for _, s := range []string{h.PrivateKeySecret, h.PassphraseSecret, h.PasswordSecret} {
			if s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// hostConnections are the inventory's connections: the listing
// (inventory.Connection) and each host with its credentials
// (inventory.ConnectionName), secrets from lookup; none without hosts. A
// secret not set is reported as "hosts.web1.private_key_secret: secret
// SSH_KEY is not set".
func (c *Config) hostConnections(lookup func(string) (string, bool)) (map[string]map[string]any, []string) {
	out := map[string]map[string]any{}
	if len(c.Hosts) == 0 {
		return out, nil
	}
	out[inventory.Connection] = inventory.Listing(c.Hosts)
	var missing []string
	for _, name := range inventory.Names(c.Hosts) {
		settings, miss := c.Hosts[name].Settings(lookup)
		for _, m := range miss {
			missing = append(missing, "hosts."+name+"."+m)
		}
		out[inventory.ConnectionName(name)] = settings
	}
	return out, missing
}
