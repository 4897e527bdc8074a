package config

import (
	"fmt"
	"slices"
	"time"

	"go.yaml.in/yaml/v4"

	"github.com/runbook/runbook/internal/yamlnode"
)

var (
	retentionKeys = []string{"older_than", "status"}
	// finishedStatuses are the statuses retention.status may name: the
	// final ones (a run that is not finished is never deleted).
	finishedStatuses = []string{"succeeded", "failed", "cancelled", "skipped"}
)

// MinRetention is the shortest retention.older_than.
const MinRetention = time.Second

// Retention is the retention: setting: runbook serve deletes, daily, the
// finished runs that ended longer than OlderThan ago (0: runs are kept
// for good), only those of Status when it is set.
type Retention struct {
	OlderThan time.Duration
	Status    []string
}

func (l *loader) retention(r *Retention, n *yaml.Node) {
	o := yamlnode.Strict(l.errf, n, "retention", retentionKeys...)
	if o == nil {
		return
	}
	on := o.Get("older_than")
	if on == nil {
		l.errf(n, "retention", "older_than is required (e.g. older_than: 30d)")
	} else if d, ok := l.duration(on, "retention.older_than", MinRetention); ok {
		r.OlderThan = d
	}
	sn := o.Get("status")
	if sn == nil {
		return
	}
	d := yamlnode.Deref(sn)
	if d.Kind != yaml.SequenceNode {
		l.errf(sn, "retention.status", "must be a list of statuses (got %s); e.g. [succeeded, skipped]", yamlnode.KindWord(sn))
		return
	}
	for i, it := range d.Content {
		path := fmt.Sprintf("retention.status[%d]", i)
		s, ok := l.Str(it, path)
		if !ok {
			continue
		}
		if !slices.Contains(finishedStatuses, s) {
			l.errf(it, path, "must be one of succeeded, failed, cancelled, skipped (got %q); a run that is not finished is never deleted", s)
			continue
		}
		r.Status = append(r.Status, s)
	}
}
