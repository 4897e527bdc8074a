package bolt

import (
	"context"
	"fmt"
	"io"

	"go.etcd.io/bbolt"
)

// Backup writes a consistent copy of the whole file from one read
// transaction (bbolt's Tx.WriteTo) while the store goes on being written:
// what commits after the copy began is not in it. start is called first
// with the copy's size and returns where to write it. The copy is a state
// file of this format that Open reads as it is. It returns the bytes
// written.
func (s *Store) Backup(ctx context.Context, start func(size int64) io.Writer) (int64, error) {
	var n int64
	err := s.db.View(func(tx *bbolt.Tx) error {
		w := start(tx.Size())
		var err error
		n, err = tx.WriteTo(ctxWriter{ctx: ctx, w: w})
		return err
	})
	if err != nil {
		return n, fmt.Errorf("back up %s: %w", s.path, err)
	}
	return n, nil
}

// ctxWriter stops a copy once ctx ends.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}
