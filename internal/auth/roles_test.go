package auth

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestScopesByNameAndByLabel(t *testing.T) {
	id := &Identity{Name: "x", Grants: Grants([]string{RoleOperator}, []string{"nks-*", "label:team=ml*"})}
	ml := Playbook{Name: "tune", Labels: map[string]string{"team": "ml-platform"}}
	assert.True(t, id.CanOn(StartRuns, Playbook{Name: "nks-upgrade"}))
	assert.True(t, id.CanOn(StartRuns, ml), "a label pattern matches the label's value")
	assert.False(t, id.CanOn(StartRuns, Playbook{Name: "tune", Labels: map[string]string{"team": "data"}}))
	assert.False(t, id.CanOn(StartRuns, Playbook{Name: "tune", Labels: map[string]string{"owner": "ml"}}), "another label key")
	assert.False(t, id.Can(StartRuns, "tune"), "Can judges by the name alone")
	assert.False(t, id.CanOn(StartRuns, Playbook{Name: "label:team=ml"}), "a name is not a label")
	assert.False(t, id.CanOn(Reload, ml), "a scoped grant gives no global permission")

	assert.NoError(t, CheckPatterns([]string{"nks-*", "label:tier=prod", "label:team=ml*"}))
	for _, bad := range []string{"label:team", "label:=ml", "label:team=", "label:team=[", "["} {
		assert.Error(t, CheckPatterns([]string{bad}), bad)
	}
}
