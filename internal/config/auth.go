package config

import (
	"fmt"
	"time"

	yaml "go.yaml.in/yaml/v4"

	"github.com/runbook/runbook/internal/auth"
	"github.com/runbook/runbook/internal/yamlnode"
)

var (
	authKeys = []string{"users", "oidc", "audit_retention"}
	userKeys = []string{"name", "roles", "playbooks", "token_sha256"}
	oidcKeys = []string{"issuer", "audience", "name_claim", "roles_claim", "role_map"}
)

// Auth holds who may use the API besides the server.token_secret token.
type Auth struct {
	Users []auth.User
	OIDC  *auth.OIDCConfig // nil: no OIDC
	// AuditRetention prunes older audit records (0: kept for good).
	AuditRetention time.Duration
}

func (l *loader) auth(a *Auth, n *yaml.Node) {
	o := yamlnode.Strict(l.errf, n, "auth", authKeys...)
	if o == nil {
		return
	}
	if un := o.Get("users"); un != nil {
		d := yamlnode.Deref(un)
		if d.Kind != yaml.SequenceNode {
			l.errf(un, "auth.users", "must be a list of users (got %s)", yamlnode.KindWord(un))
		} else {
			seen := map[string]bool{}
			for i, it := range d.Content {
				path := fmt.Sprintf("auth.users[%d]", i)
				if u, ok := l.user(it, path); ok {
					if seen[u.Name] {
						l.errf(it, path, "user %s is named twice", u.Name)
					}
					seen[u.Name] = true
					a.Users = append(a.Users, u)
				}
			}
		}
	}
	if on := o.Get("oidc"); on != nil {
		a.OIDC = l.oidc(on)
	}
	if rn := o.Get("audit_retention"); rn != nil {
		if d, ok := l.duration(rn, "auth.audit_retention", time.Hour); ok {
			a.AuditRetention = d
		}
	}
}

// strings decodes a list of strings.
func (l *loader) strings(n *yaml.Node, path string) ([]string, bool) {
	d := yamlnode.Deref(n)
	if d.Kind != yaml.SequenceNode {
		l.errf(n, path, "must be a list of strings (got %s)", yamlnode.KindWord(n))
		return nil, false
	}
	var out []string
	ok := true
	for i, it := range d.Content {
		s, sok := l.Str(it, fmt.Sprintf("%s[%d]", path, i))
		ok = ok && sok
		out = append(out, s)
	}
	return out, ok
}

func (l *loader) user(n *yaml.Node, path string) (auth.User, bool) {
	o := yamlnode.Strict(l.errf, n, path, userKeys...)
	if o == nil {
		return auth.User{}, false
	}
	var u auth.User
	ok := true
	check := func(n *yaml.Node, p string, err error) {
		if err != nil {
			l.errf(n, p, "%v", err)
			ok = false
		}
	}
	if nn := o.Get("name"); nn == nil {
		l.errf(o.Node, path, "name is required")
		ok = false
	} else if s, sok := l.Str(nn, path+".name"); sok {
		u.Name = s
		check(nn, path+".name", auth.CheckName(s))
	} else {
		ok = false
	}
	if rn := o.Get("roles"); rn == nil {
		l.errf(o.Node, path, "roles is required (%v)", auth.RoleNames())
		ok = false
	} else if rs, rok := l.strings(rn, path+".roles"); rok {
		u.Roles = rs
		check(rn, path+".roles", auth.CheckRoles(rs))
	} else {
		ok = false
	}
	if pn := o.Get("playbooks"); pn != nil {
		if ps, pok := l.strings(pn, path+".playbooks"); pok {
			u.Playbooks = ps
			check(pn, path+".playbooks", auth.CheckPatterns(ps))
		} else {
			ok = false
		}
	}
	if hn := o.Get("token_sha256"); hn == nil {
		l.errf(o.Node, path, "token_sha256 is required (printf %%s TOKEN | sha256sum; runbook token create makes tokens kept in the state instead)")
		ok = false
	} else if h, hok := l.Str(hn, path+".token_sha256"); hok {
		u.TokenSHA256 = h
		check(hn, path+".token_sha256", auth.CheckHash(h))
	} else {
		ok = false
	}
	return u, ok
}

func (l *loader) oidc(n *yaml.Node) *auth.OIDCConfig {
	o := yamlnode.Strict(l.errf, n, "auth.oidc", oidcKeys...)
	if o == nil {
		return nil
	}
	c := &auth.OIDCConfig{}
	for key, dst := range map[string]*string{"issuer": &c.Issuer, "audience": &c.Audience, "name_claim": &c.NameClaim, "roles_claim": &c.RolesClaim} {
		if vn := o.Get(key); vn != nil {
			if s, ok := l.nonEmpty(vn, "auth.oidc."+key); ok {
				*dst = s
			}
		}
	}
	if c.Issuer == "" || c.Audience == "" {
		l.errf(o.Node, "auth.oidc", "issuer and audience are required")
		return nil
	}
	if mn := o.Get("role_map"); mn != nil {
		m := yamlnode.Mapping(l.errf, mn, "auth.oidc.role_map")
		if m == nil {
			return nil
		}
		c.RoleMap = map[string][]string{}
		for _, p := range m.Pairs {
			path := yamlnode.KeyPath("auth.oidc.role_map", p.Name)
			rs, ok := l.strings(p.Val, path)
			if !ok {
				continue
			}
			if err := auth.CheckRoles(rs); err != nil {
				l.errf(p.Val, path, "%v", err)
				continue
			}
			c.RoleMap[p.Name] = rs
		}
	}
	return c
}
