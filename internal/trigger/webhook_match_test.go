package trigger

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestIntakeNamesThePlaybooksItCouldNotEvaluate(t *testing.T) {
	// A playbook listening on route sms; trigger is the rest of its webhook
	// trigger's flow map, inputs its trigger inputs.
	playbook := func(name, trigger, inputs string) string {
		return fmt.Sprintf(`version: 1
name: %s
inputs:
  n: {type: string, default: ""}
triggers:
  - webhook: {route: sms%s}
    inputs: {%s}
steps:
  - id: a
    uses: log
    with: {message: hi}
`, name, trigger, inputs)
	}
	cases := []struct {
		name     string
		playbook string
		skipped  bool // named in the answer's skipped
		runs     int  // for a delivery of two hooks
	}{
		{"an if that fails to evaluate skips the playbook",
			playbook("bad-if", `, if: "int(trigger.event) > 0"`, ""), true, 0},
		{"an input that fails to evaluate skips the playbook",
			playbook("bad-input", "", `n: "${{ int(trigger.event) }}"`), true, 0},
		{"an if that is false starts nothing and is not skipped",
			playbook("false-if", `, if: "trigger.event == 'NOPE'"`, ""), false, 0},
		{"each: hook with an if that fails to evaluate skips the playbook",
			playbook("bad-hook-if", `, each: hook, if: "int(trigger.hook.enterpriseName) > 0"`, ""), true, 0},
		{"each: hook with an if that is false starts nothing and is not skipped",
			playbook("false-hook-if", `, each: hook, if: "trigger.hook.recipientNo == 'nobody'"`, ""), false, 0},
		{"each: hook with an if true for one hook starts one run",
			playbook("one-hook", `, each: hook, if: "trigger.hook.recipientNo == '01011112222'"`, ""), false, 1},
		{"a playbook that evaluates starts its run and is not skipped",
			playbook("good", "", `n: "${{ trigger.event }}"`), false, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newHookEnv(t, 0, c.playbook)
			a := e.post("/hooks/sms", nil, unsubscribe("m-1", "01011112222", "01033334444"))
			require.Equal(t, 200, a.status, a.raw)
			assert.Equal(t, "accepted", a.body["status"])
			assert.Len(t, a.body["runs"], c.runs)
			assert.Len(t, e.starter.started(), c.runs)
			name := strings.TrimPrefix(strings.SplitN(c.playbook, "\n", 3)[1], "name: ")
			if c.skipped {
				assert.Contains(t, a.body["skipped"], name)
			} else {
				assert.NotContains(t, a.raw, `"skipped"`)
			}
		})
	}
}
