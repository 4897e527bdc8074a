package server

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/runbook/runbook/internal/fault"
)

// backuper is a store that copies itself while it is written: a bbolt
// file (state/bolt.Store.Backup). A PostgreSQL state is backed up with
// pg_dump.
type backuper interface {
	Backup(ctx context.Context, start func(size int64) io.Writer) (int64, error)
}

// backupState answers GET /api/v1/state/backup: the state file, copied
// from one read transaction while runs go on, with its length. It is
// for `runbook state backup`, which verifies the copy before keeping it.
func (s *Server) backupState(w http.ResponseWriter, r *http.Request) {
	b, ok := s.store.(backuper)
	if !ok {
		writeError(w, http.StatusConflict, fault.Conflict,
			"this server's state is a PostgreSQL database: back it up with pg_dump (docs/operations.md), not through runbook")
		return
	}
	// A large file takes longer than the listener's write timeout.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	_, err := b.Backup(r.Context(), func(size int64) io.Writer {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		w.WriteHeader(http.StatusOK)
		return w
	})
	if err != nil {
		// The status is sent: the copy ends short of its length, which
		// the client refuses.
		s.log.Warn("state backup stopped", "err", err)
	}
}
