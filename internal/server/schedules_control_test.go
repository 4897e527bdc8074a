package server_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// twoSchedules has two schedule triggers (indexes 0 and 2) and a webhook.
const twoSchedules = `version: 1
name: twice
triggers:
  - schedule: {cron: "0 3 * * *"}
  - webhook: {route: sms}
  - schedule: {cron: "0 4 * * *"}
steps:
  - {id: say, uses: log, with: {message: hi}}
`

// The schedule controls refuse what they cannot do with the reason, and
// keep a pause of every trigger apart from a pause of one.
func TestScheduleControlsRefuseWhatTheyCannotDo(t *testing.T) {
	e := newEnv(t, map[string]string{"twice.yaml": twoSchedules, "gate.yaml": approvalPlaybook})
	cases := []struct {
		name, path string
		body       map[string]any
		status     int
		says       string
	}{
		{"a pause needs a reason", "/api/v1/playbooks/twice/schedules/pause", map[string]any{}, 400, `a pause needs a "reason"`},
		{"a playbook without schedules has none to pause", "/api/v1/playbooks/gate/schedules/pause", map[string]any{"reason": "x"}, 400, "has no schedule triggers"},
		{"a trigger that is no schedule is refused", "/api/v1/playbooks/twice/schedules/pause", map[string]any{"reason": "x", "trigger": 1}, 400, "no schedule trigger at index 1 (its schedule triggers: 0, 2)"},
		{"a resume finds no pause", "/api/v1/playbooks/twice/schedules/resume", map[string]any{}, 409, "its schedules are not paused"},
		{"run now must name one of several", "/api/v1/playbooks/twice/schedules/run", map[string]any{}, 400, `has 2 schedule triggers (0, 2): name one with "trigger"`},
		{"a backfill needs its times", "/api/v1/playbooks/twice/schedules/backfill", map[string]any{"trigger": 0, "from": "yesterday", "to": "2026-01-01T00:00:00Z"}, 400, "want an RFC 3339 time"},
		{"a backfill that ends before it begins", "/api/v1/playbooks/twice/schedules/backfill", map[string]any{"trigger": 0, "from": "2026-01-02T00:00:00Z", "to": "2026-01-01T00:00:00Z"}, 400, "before it begins"},
		{"a backfill over its bound", "/api/v1/playbooks/twice/schedules/backfill", map[string]any{"trigger": 2, "from": "2026-01-01T00:00:00Z", "to": "2026-01-10T00:00:00Z", "max": 3}, 400, "more than 3 slots"},
		{"an unknown playbook", "/api/v1/playbooks/nope/schedules/pause", map[string]any{"reason": "x"}, 404, `no playbook "nope"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.api("POST", tc.path, tc.body)
			assert.Equal(t, tc.status, r.status, "%s", r.body)
			assert.Contains(t, r.json(t)["error"], tc.says)
		})
	}

	t.Run("a pause of every trigger and one of trigger 2 are lifted each by its own resume", func(t *testing.T) {
		require.Equal(t, 200, e.api("POST", "/api/v1/playbooks/twice/schedules/pause", map[string]any{"reason": "freeze"}).status)
		require.Equal(t, 200, e.api("POST", "/api/v1/playbooks/twice/schedules/pause", map[string]any{"reason": "noisy", "trigger": 2}).status)
		paused := func() map[float64]string {
			out := map[float64]string{}
			for _, sc := range e.api("GET", "/api/v1/schedules", nil).json(t)["schedules"].([]any) {
				m := sc.(map[string]any)
				if p, ok := m["paused"].(map[string]any); ok && m["playbook"] == "twice" {
					out[m["trigger"].(float64)] = p["reason"].(string)
				}
			}
			return out
		}
		assert.Equal(t, map[float64]string{0: "freeze", 2: "freeze"}, paused(), "the pause of every trigger is shown first")
		r := e.api("POST", "/api/v1/playbooks/twice/schedules/resume", map[string]any{})
		require.Equal(t, 200, r.status, "%s", r.body)
		assert.Equal(t, "freeze", r.json(t)["pause"].(map[string]any)["reason"])
		assert.Equal(t, map[float64]string{2: "noisy"}, paused(), "trigger 2 keeps its own pause")
		r = e.api("POST", "/api/v1/playbooks/twice/schedules/resume", map[string]any{"trigger": 2})
		require.Equal(t, 200, r.status, "%s", r.body)
		assert.Empty(t, paused())
	})
}
