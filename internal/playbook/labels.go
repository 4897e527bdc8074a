package playbook

import "github.com/runbook/runbook/internal/yamlnode"

// labels reads `labels:`, a map of short names to short values that
// groups playbooks (team: ml, tier: prod): roles may be limited to the
// playbooks of a label. labelKey and labelValue (names.go) bound them:
// what a role's scope (label:KEY=VALUE) and a listing filter can name.
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
		if !labelKey(p.Name) {
			l.errf(p.Key, path, "invalid label name %q: use 1-63 lower-case letters, digits, '.', '_', '/' or '-', starting and ending with a letter or digit", p.Name)
			continue
		}
		v, ok := l.Str(p.Val, path)
		if !ok {
			continue
		}
		if !labelValue(v) {
			l.errf(p.Val, path, "invalid label value %q: use 1-63 letters, digits, '.', '_' or '-', starting and ending with a letter or digit", v)
			continue
		}
		pb.Labels[p.Name] = v
	}
}
