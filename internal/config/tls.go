package config

import (
	yaml "go.yaml.in/yaml/v4"

	"github.com/runbook/runbook/internal/yamlnode"
)

var tlsKeys = []string{"cert", "key"}

// serverTLS reads server.tls: {cert, key}, the PEM files of the HTTPS
// listener, relative to the config's directory.
func (l *loader) serverTLS(c *Config, n *yaml.Node) {
	if n == nil {
		return
	}
	o := yamlnode.Strict(l.errf, n, "server.tls", tlsKeys...)
	if o == nil {
		return
	}
	for _, f := range []struct {
		key string
		to  *string
	}{{"cert", &c.Server.TLSCert}, {"key", &c.Server.TLSKey}} {
		v := o.Get(f.key)
		if v == nil {
			l.errf(n, "server.tls", "%s is required (the PEM file of the %s)", f.key, map[string]string{"cert": "certificate and its chain", "key": "private key"}[f.key])
			continue
		}
		if s, ok := l.nonEmpty(v, "server.tls."+f.key); ok {
			*f.to = c.resolve(s)
		}
	}
}
