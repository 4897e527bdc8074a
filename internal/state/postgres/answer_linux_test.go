package postgres

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loopback returns the two ends of a TCP connection on 127.0.0.1.
func loopback(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	server, err = ln.Accept()
	require.NoError(t, err)
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// awaitAnswer returns once the connection has bytes to read or its peer
// closed it, however long its bound (here a minute), and waits out its
// bound when nothing comes; a connection without a descriptor is not
// waited on, and a TLS connection is waited on through its socket.
func TestAwaitAnswerReturnsWhenTheAnswerComes(t *testing.T) {
	const long = time.Minute
	returns := func(what string, conn net.Conn, max time.Duration) time.Duration {
		t.Helper()
		done := make(chan time.Duration, 1)
		go func() {
			start := time.Now()
			awaitAnswer(conn, max)
			done <- time.Since(start)
		}()
		select {
		case d := <-done:
			return d
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: still waiting after 30 s", what)
			return 0
		}
	}

	client, server := loopback(t)
	go func() {
		time.Sleep(50 * time.Millisecond)
		server.Write([]byte("answer")) //nolint:errcheck // the wait shows it
	}()
	assert.GreaterOrEqual(t, returns("bytes that come", client, long), 40*time.Millisecond, "it waited for them")
	returns("bytes already there", client, long)
	buf := make([]byte, 16)
	n, err := client.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, "answer", string(buf[:n]), "the bytes are left to the reader")

	assert.GreaterOrEqual(t, returns("nothing to read", client, 20*time.Millisecond), 20*time.Millisecond, "it waits out its bound")

	require.NoError(t, server.Close())
	returns("a peer that closed", client, long)

	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	returns("a connection without a descriptor", a, long)

	tc, ts := loopback(t)
	go func() {
		time.Sleep(20 * time.Millisecond)
		ts.Write([]byte{0x16, 3, 3}) //nolint:errcheck // the start of a record
	}()
	returns("a TLS connection's socket", tls.Client(tc, &tls.Config{InsecureSkipVerify: true}), long) //nolint:gosec // never handshaken
}
