package state

import (
	"maps"
	"slices"
	"strings"
)

// FieldArgs are the command-line arguments an answer to a needs for its
// required fields, in the order of their names: " --field ticket=INTEGER"
// ("" when a requires none, or is nil). The hints that say how to answer
// an approval (runbook runs approve RUN STEP...) end with them.
func (a *ApprovalRequest) FieldArgs() string {
	if a == nil {
		return ""
	}
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(a.Fields)) {
		if f := a.Fields[name]; f.Required {
			b.WriteString(" --field " + name + "=" + strings.ToUpper(f.Type))
		}
	}
	return b.String()
}
