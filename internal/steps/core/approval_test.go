package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
	"github.com/runbook/runbook/internal/steps/stepstest"
)

func TestApproval(t *testing.T) {
	d := desc(t, "approval")
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	fields := map[string]any{
		"replicas": map[string]any{"type": "integer", "required": true},
		"note":     map[string]any{"type": "string", "default": "none"},
		"force":    map[string]any{"type": "boolean"},
	}

	t.Run("an approval returns the answer and typed fields", func(t *testing.T) {
		c := stepstest.NewCall(t, d, map[string]any{"message": "scale?", "approvers": []any{"kim"}, "fields": fields})
		stepstest.HostOf(c).Answer(steps.ApprovalResponse{Approved: true, By: "kim", Comment: "go", At: at,
			Fields: map[string]any{"replicas": 3.0, "force": true}})
		out, err := d.Run(context.Background(), c)
		require.NoError(t, err)
		assert.Equal(t, steps.Outputs{
			"approved": true, "by": "kim", "approvers": []string{"kim"}, "comment": "go", "answered_at": "2026-03-04T05:06:07Z",
			"fields": map[string]any{"replicas": int64(3), "note": "none", "force": true}, "timed_out": false,
		}, out)
		reqs := stepstest.HostOf(c).ApprovalRequests()
		require.Len(t, reqs, 1)
		assert.Equal(t, "scale?", reqs[0].Message)
		assert.Equal(t, []string{"kim"}, reqs[0].Approvers)
		assert.Equal(t, steps.Field{Type: "integer", Required: true}, reqs[0].Fields["replicas"])
		assert.True(t, reqs[0].Deadline.IsZero(), "no timeout, no deadline")
	})
	t.Run("a rejection fails with the approver and comment", func(t *testing.T) {
		c := stepstest.NewCall(t, d, map[string]any{"message": "ok?"})
		stepstest.HostOf(c).Answer(steps.ApprovalResponse{Approved: false, By: "lee", Comment: "not today"})
		_, err := d.Run(context.Background(), c)
		var se *fault.Error
		require.True(t, errors.As(err, &se))
		assert.Equal(t, fault.Failed, se.Code)
		assert.Equal(t, "rejected by lee: not today", se.Message)
	})
	t.Run("an answer from someone not listed is refused", func(t *testing.T) {
		c := stepstest.NewCall(t, d, map[string]any{"message": "ok?", "approvers": []any{"kim"}})
		stepstest.HostOf(c).Answer(steps.ApprovalResponse{Approved: true, By: "mallory"})
		_, err := d.Run(context.Background(), c)
		assert.Equal(t, fault.Unauthorized, fault.CodeOf(err))
	})
	t.Run("invalid answer fields fail as invalid, every problem listed", func(t *testing.T) {
		c := stepstest.NewCall(t, d, map[string]any{"message": "ok?", "fields": fields})
		stepstest.HostOf(c).Answer(steps.ApprovalResponse{Approved: true, By: "kim",
			Fields: map[string]any{"force": "yes", "extra": 1}})
		_, err := d.Run(context.Background(), c)
		assert.Equal(t, fault.Invalid, fault.CodeOf(err))
		assert.Equal(t, `approval answer: field force must be a boolean (got string "yes"); field replicas is required; unknown field "extra"`,
			err.(*fault.Error).Message)
	})
	t.Run("a fractional answer to an integer field is invalid", func(t *testing.T) {
		c := stepstest.NewCall(t, d, map[string]any{"message": "ok?", "fields": fields})
		stepstest.HostOf(c).Answer(steps.ApprovalResponse{Approved: true, Fields: map[string]any{"replicas": 1.5}})
		_, err := d.Run(context.Background(), c)
		assert.Equal(t, fault.Invalid, fault.CodeOf(err))
	})
	t.Run("a suspending host suspends the step unchanged", func(t *testing.T) {
		c := stepstest.NewCall(t, d, map[string]any{"message": "ok?"})
		stepstest.HostOf(c).Suspend = true
		_, err := d.Run(context.Background(), c)
		assert.Same(t, fault.ErrSuspended, err)
	})
	t.Run("the deadline is computed once and checkpointed", func(t *testing.T) {
		c := stepstest.NewCall(t, d, map[string]any{"message": "ok?", "timeout": "2h"})
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		c.Now = func() time.Time { return now }
		h := stepstest.HostOf(c)
		h.Suspend = true
		_, err := d.Run(context.Background(), c)
		require.ErrorIs(t, err, fault.ErrSuspended)
		var cp struct{ Deadline time.Time }
		require.NoError(t, json.Unmarshal(h.LastCheckpoint(), &cp))
		assert.Equal(t, now.Add(2*time.Hour), cp.Deadline)
		assert.Equal(t, now.Add(2*time.Hour), h.ApprovalRequests()[0].Deadline)

		// Resumed later: the same deadline, no new checkpoint.
		c.Resume = h.LastCheckpoint()
		now = now.Add(90 * time.Minute)
		_, err = d.Run(context.Background(), c)
		require.ErrorIs(t, err, fault.ErrSuspended)
		assert.Equal(t, cp.Deadline, h.ApprovalRequests()[1].Deadline)
		assert.Len(t, h.Checkpoints(), 1)
	})
	t.Run("an unanswered approval times out at its deadline", func(t *testing.T) {
		c := stepstest.NewCall(t, d, map[string]any{"message": "ok?", "timeout": 3600})
		c.Resume = []byte(`{"deadline":"` + time.Now().Add(50*time.Millisecond).Format(time.RFC3339Nano) + `"}`)
		_, err := d.Run(context.Background(), c)
		assert.Equal(t, fault.Timeout, fault.CodeOf(err))
	})
	t.Run("on_timeout approve approves at the deadline with the fields' defaults", func(t *testing.T) {
		deadline := time.Now().Add(50 * time.Millisecond).UTC()
		c := stepstest.NewCall(t, d, map[string]any{"message": "ok?", "timeout": 3600, "on_timeout": "approve",
			"fields": map[string]any{"note": map[string]any{"type": "string", "default": "none"}, "n": map[string]any{"type": "integer"}}})
		c.Resume = []byte(`{"deadline":"` + deadline.Format(time.RFC3339Nano) + `"}`)
		out, err := d.Run(context.Background(), c)
		require.NoError(t, err)
		assert.Equal(t, true, out["approved"])
		assert.Equal(t, "timeout", out["by"])
		assert.Equal(t, true, out["timed_out"])
		assert.Equal(t, map[string]any{"note": "none", "n": nil}, out["fields"])
		assert.Equal(t, deadline.Format(time.RFC3339), out["answered_at"])
	})
	t.Run("on_timeout approve needs a timeout and defaults for required fields", func(t *testing.T) {
		problems := d.CheckLiteral(map[string]any{"message": "m", "on_timeout": "approve", "fields": map[string]any{
			"ticket": map[string]any{"type": "string", "required": true},
		}})
		var got []string
		for _, p := range problems {
			got = append(got, p.Error())
		}
		assert.Equal(t, []string{
			"fields.ticket: a required field needs a default when on_timeout is approve",
			"on_timeout: on_timeout needs a timeout",
		}, got)
	})
	t.Run("an unknown answer field names the field it probably meant", func(t *testing.T) {
		c := stepstest.NewCall(t, d, map[string]any{"message": "ok?", "fields": map[string]any{"ticket": map[string]any{"type": "string"}}})
		stepstest.HostOf(c).Answer(steps.ApprovalResponse{Approved: true, By: "kim", Fields: map[string]any{"tiket": "OPS-1"}})
		_, err := d.Run(context.Background(), c)
		assert.Equal(t, `approval answer: unknown field "tiket"; did you mean "ticket"?`, err.(*fault.Error).Message)
	})
	t.Run("field declarations are checked at load", func(t *testing.T) {
		problems := d.CheckLiteral(map[string]any{"message": "m", "fields": map[string]any{
			"n":      map[string]any{"type": "integer", "default": "x"},
			"bad-id": map[string]any{"type": "string"},
			"t":      map[string]any{"type": "date"},
		}})
		var got []string
		for _, p := range problems {
			got = append(got, p.Error())
		}
		assert.Equal(t, []string{
			`fields.t.type: must be one of string, integer, number, boolean (got "date")`,
			`fields: field name "bad-id" must be a letter or _ followed by letters, digits or _`,
			`fields.n.default: must be an integer (got string "x")`,
		}, got)
	})
}
