package config

import (
	"net/url"
	"strings"

	"go.yaml.in/yaml/v4"

	"github.com/runbook/runbook/internal/yamlnode"
)

// IsDSN reports a state location that names a PostgreSQL database
// (postgres:// or postgresql://) rather than a bbolt file.
func IsDSN(loc string) bool {
	return strings.HasPrefix(loc, "postgres://") || strings.HasPrefix(loc, "postgresql://")
}

// state reads `state:`: a file path or a postgres:// DSN as a string, or a
// mapping {file: PATH} / {dsn: URL, password_secret: NAME}. A password
// written into a config DSN is refused: config files are shared and
// committed, so the password comes from a secret (or PGPASSWORD).
func (l *loader) state(c *Config, n *yaml.Node) {
	if d := yamlnode.Deref(n); d.Kind == yaml.ScalarNode {
		if s, ok := l.nonEmpty(n, "state"); ok {
			l.stateLocation(c, n, "state", s)
		}
		return
	}
	o := yamlnode.Strict(l.errf, n, "state", "file", "dsn", "password_secret")
	if o == nil {
		return
	}
	file, dsn := o.Get("file"), o.Get("dsn")
	switch {
	case file != nil && dsn != nil:
		l.errf(dsn, "state.dsn", "give either state.file or state.dsn, not both")
		return
	case file == nil && dsn == nil:
		l.errf(n, "state", "give state.file (a bbolt file) or state.dsn (a postgres:// database)")
		return
	case file != nil:
		if s, ok := l.nonEmpty(file, "state.file"); ok {
			if IsDSN(s) {
				l.errf(file, "state.file", "is a database URL: write it as state.dsn")
				return
			}
			c.State = c.resolve(s)
		}
	default:
		if s, ok := l.nonEmpty(dsn, "state.dsn"); ok {
			if !IsDSN(s) {
				l.errf(dsn, "state.dsn", "must be a postgres:// or postgresql:// URL")
				return
			}
			l.stateLocation(c, dsn, "state.dsn", s)
		}
	}
	if ps := o.Get("password_secret"); ps != nil {
		if dsn == nil {
			l.errf(ps, "state.password_secret", "applies to state.dsn")
			return
		}
		if s, ok := l.nonEmpty(ps, "state.password_secret"); ok {
			c.StatePasswordSecret = s
		}
	}
}

// stateLocation sets c.State from a string: a DSN as given (without a
// password), a file resolved against the config's directory.
func (l *loader) stateLocation(c *Config, n *yaml.Node, path, s string) {
	if !IsDSN(s) {
		c.State = c.resolve(s)
		return
	}
	u, err := url.Parse(s)
	if err != nil {
		l.errf(n, path, "is not a valid database URL")
		return
	}
	if _, has := u.User.Password(); has {
		l.errf(n, path, "holds a password: put it in a secret named by state.password_secret (or PGPASSWORD), not in the config file")
		return
	}
	c.State = s
}

// StateDSN returns the state DSN with the password from lookup filled in
// (when StatePasswordSecret names one). A secret that is not set is an
// error naming it.
func (c *Config) StateDSN(lookup func(string) (string, bool)) (string, error) {
	if !IsDSN(c.State) || c.StatePasswordSecret == "" {
		return c.State, nil
	}
	pw, ok := lookup(c.StatePasswordSecret)
	if !ok {
		return "", &missingSecretError{path: "state.password_secret", name: c.StatePasswordSecret}
	}
	u, err := url.Parse(c.State)
	if err != nil {
		return "", err
	}
	u.User = url.UserPassword(u.User.Username(), pw)
	return u.String(), nil
}

type missingSecretError struct{ path, name string }

func (e *missingSecretError) Error() string {
	return e.path + ": secret " + e.name + " is not set"
}
