package objectstorage_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/cloud/identity"
	"github.com/runbook/runbook/internal/cloud/objectstorage"
	"github.com/runbook/runbook/internal/egress"
	"github.com/runbook/runbook/internal/fault"
)

// TestAnObjectHostFromThePlaybookMeetsTheDestinationPolicy: without a
// base_url, the host of an obs:// URI is the playbook's; with 127.0.0.0/8
// denied, a call to a loopback host fails at once naming the rule, and the
// listener (which would get the storage token) accepts no connection.
func TestAnObjectHostFromThePlaybookMeetsTheDestinationPolicy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	var conns atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.Close()
		}
	}()
	cl, err := objectstorage.New(objectstorage.Config{Identity: identity.Config{Token: "storage-token"}, Sleep: func(context.Context, time.Duration) error { return nil }})
	require.NoError(t, err)
	u, err := objectstorage.Parse("obs://" + ln.Addr().String() + "/v1/AUTH_t/c/o")
	require.NoError(t, err)

	// Reachable before: the listener is dialled (its TLS handshake fails).
	_, _, err = cl.Head(context.Background(), u)
	require.Error(t, err)
	require.Positive(t, conns.Load())
	conns.Store(0)

	r, err := egress.ParseRule("127.0.0.0/8")
	require.NoError(t, err)
	egress.Set(egress.Policy{Deny: []egress.Rule{r}})
	t.Cleanup(func() { egress.Set(egress.Policy{}) })
	_, _, err = cl.Head(context.Background(), u)
	require.Error(t, err)
	var fe *fault.Error
	require.True(t, errors.As(err, &fe))
	assert.Equal(t, fault.Invalid, fe.Code)
	assert.Contains(t, err.Error(), "is refused by the http.deny entry 127.0.0.0/8")
	assert.NotContains(t, err.Error(), "attempts", "a refusal is not retried")
	assert.Zero(t, conns.Load(), "the denied host accepted a connection")
}
