package pgtest

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A restart cuts the connections open before it; a client that connects
// again with the same URL finds its committed rows on the same port, and
// the harness goes on giving tests their schemas.
func TestARestartKeepsTheDataAndThePort(t *testing.T) {
	ctx := context.Background()
	dsn := DB(t)
	if os.Getenv(EnvServer) != "" {
		t.Skip("an external server is the operator's")
	}
	before, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close(ctx)
	if _, err := before.Exec(ctx, `CREATE TABLE kept (x int); INSERT INTO kept VALUES (42)`); err != nil {
		t.Fatal(err)
	}
	port := shared.local.port

	stopped := time.Now()
	answered := Restart(t, 200*time.Millisecond)
	if answered.Sub(stopped) < 200*time.Millisecond {
		t.Errorf("the server answered %s after the stop began, before its time down", answered.Sub(stopped))
	}
	if shared.local.port != port {
		t.Errorf("the server came back on port %d, want %d", shared.local.port, port)
	}
	if _, err := before.Exec(ctx, `SELECT 1`); err == nil {
		t.Error("a connection opened before the restart still answers")
	}
	after, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect after the restart: %v", err)
	}
	defer after.Close(ctx)
	var x int
	if err := after.QueryRow(ctx, `SELECT x FROM kept`).Scan(&x); err != nil || x != 42 {
		t.Errorf("the committed row after the restart: %d, %v; want 42", x, err)
	}
	t.Run("a test after the restart gets its schema", func(t *testing.T) { _ = DB(t) })
}

// Terminate cuts every client connection to the database with 57P01 (as
// pg_terminate_backend does) and leaves the harness able to create and
// drop schemas.
func TestTerminateCutsEveryClientConnection(t *testing.T) {
	ctx := context.Background()
	dsn := DB(t)
	var conns []*pgx.Conn
	for range 3 {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		conns = append(conns, conn)
	}
	if n := Terminate(t); n < len(conns) {
		t.Errorf("Terminate ended %d connections, want at least %d", n, len(conns))
	}
	for i, conn := range conns {
		_, err := conn.Exec(ctx, `SELECT 1`)
		var pgErr *pgconn.PgError
		if err == nil {
			t.Errorf("connection %d still answers", i)
		} else if errors.As(err, &pgErr) && pgErr.Code != "57P01" {
			t.Errorf("connection %d: %v, want SQLSTATE 57P01 (admin shutdown)", i, err)
		}
	}
	t.Run("a test after the termination gets its schema", func(t *testing.T) { _ = DB(t) })
}
