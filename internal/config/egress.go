package config

import (
	"fmt"

	yaml "go.yaml.in/yaml/v4"

	"github.com/runbook/runbook/internal/egress"
	"github.com/runbook/runbook/internal/yamlnode"
)

var httpKeys = []string{"allow", "deny"}

// egress reads http: {allow: [...], deny: [...]}, the destinations the
// requests playbooks aim may and may not reach (internal/egress).
func (l *loader) egress(p *egress.Policy, n *yaml.Node) {
	o := yamlnode.Strict(l.errf, n, "http", httpKeys...)
	if o == nil {
		return
	}
	p.Allow = l.rules(o.Get("allow"), "http.allow")
	p.Deny = l.rules(o.Get("deny"), "http.deny")
}

func (l *loader) rules(n *yaml.Node, path string) []egress.Rule {
	if n == nil {
		return nil
	}
	d := yamlnode.Deref(n)
	if d.Kind != yaml.SequenceNode {
		l.errf(n, path, "must be a list of CIDRs and host names (got %s); e.g. [10.0.0.0/8, hooks.example.com]", yamlnode.KindWord(n))
		return nil
	}
	var out []egress.Rule
	for i, it := range d.Content {
		ipath := fmt.Sprintf("%s[%d]", path, i)
		s, ok := l.Str(it, ipath)
		if !ok {
			continue
		}
		r, err := egress.ParseRule(s)
		if err != nil {
			l.errf(it, ipath, "%s", err)
			continue
		}
		out = append(out, r)
	}
	return out
}
