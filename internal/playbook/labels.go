package playbook

import (
	"regexp"
	"sync"

	"github.com/runbook/runbook/internal/yamlnode"
)

// labelKeyRE and labelValueRE bound a playbook label: what a role's scope
// (label:KEY=VALUE) and a listing filter can name.
var (
	labelKeyRE   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]([a-z0-9._/-]{0,61}[a-z0-9])?$`) })
	labelValueRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$`) })
)

// labels reads `labels:`, a map of short names to short values that
// groups playbooks (team: ml, tier: prod): roles may be limited to the
// playbooks of a label.
func (l *loader) labels(pb *Playbook, o *yamlnode.Object) {
	n := o.Get("labels")
	if n == nil {
		return
	}
	m := yamlnode.Mapping(l.errf, n, "labels")
	if m == nil {
		return
	}
	pb.Labels = make(map[string]string, len(m.Pairs))
	for _, p := range m.Pairs {
		path := yamlnode.KeyPath("labels", p.Name)
		if !labelKeyRE().MatchString(p.Name) {
			l.errf(p.Key, path, "invalid label name %q: use 1-63 lower-case letters, digits, '.', '_', '/' or '-', starting and ending with a letter or digit", p.Name)
			continue
		}
		v, ok := l.Str(p.Val, path)
		if !ok {
			continue
		}
		if !labelValueRE().MatchString(v) {
			l.errf(p.Val, path, "invalid label value %q: use 1-63 letters, digits, '.', '_' or '-', starting and ending with a letter or digit", v)
			continue
		}
		pb.Labels[p.Name] = v
	}
}
