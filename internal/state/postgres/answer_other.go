//go:build !linux

package postgres

import (
	"net"
	"time"
)

// awaitAnswer waits for nothing here: pgx's read waits (see sendWrite).
func awaitAnswer(net.Conn, time.Duration) {}
