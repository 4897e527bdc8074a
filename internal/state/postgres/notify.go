package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runbook/runbook/internal/state"
)

// The notification channels, one per concern, each suffixed with
// ":" and the schema runbook's tables are in (see the triggers in
// migrations/0001_baseline.sql).
var noticeChannels = map[string]state.NoticeKind{
	"runbook_work":     state.NoticeWork,
	"runbook_approval": state.NoticeApproval,
	"runbook_cancel":   state.NoticeCancel,
	"runbook_key":      state.NoticeKeyFreed,
	"runbook_resume":   state.NoticeResume,
	"runbook_pause":    state.NoticePause,
	agentChannel:       state.NoticeAgent,
}

// notifySQL sends a notice on channel $1 (suffixed with the schema) with
// payload $2.
const notifySQL = `SELECT pg_notify($1 || ':' || current_schema(), $2)`

// agentChannel is NoticeAgent's channel (PlaceAgentAssignments notifies
// on it in its own transaction).
const agentChannel = "runbook_agent"

// Listen implements state.Coordinator on a connection of its own, taken
// out of the pool for as long as it listens.
func (s *Store) Listen(ctx context.Context, fn func(state.Notice)) error {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	conn := pc.Hijack()
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	var schema string
	if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	for ch := range noticeChannels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch + ":" + schema}.Sanitize()); err != nil {
			return fmt.Errorf("listen %s: %w", ch, err)
		}
	}
	fn(state.Notice{Kind: state.NoticeListening})
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("listen: %w", err)
		}
		ch, _, _ := strings.Cut(n.Channel, ":")
		switch kind, ok := noticeChannels[ch]; {
		case kind == state.NoticeKeyFreed || kind == state.NoticeAgent:
			fn(state.Notice{Kind: kind, Key: n.Payload})
		case ok:
			fn(state.Notice{Kind: kind, RunID: n.Payload})
		}
	}
}

// Notify implements state.Coordinator.
func (s *Store) Notify(ctx context.Context, n state.Notice) error {
	for ch, kind := range noticeChannels {
		if kind == n.Kind {
			payload := n.RunID
			if kind == state.NoticeKeyFreed || kind == state.NoticeAgent {
				payload = n.Key
			}
			if _, err := s.pool.Exec(ctx, notifySQL, ch, payload); err != nil {
				return fmt.Errorf("notify %s: %w", ch, err)
			}
			return nil
		}
	}
	return fmt.Errorf("notify: unknown notice kind %q", n.Kind)
}
