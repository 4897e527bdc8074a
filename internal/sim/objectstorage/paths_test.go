package objectstorage_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/sim"
)

// Swift object names may end in "/" (pseudo-folders): the simulator keeps
// such a path as sent, while the account and container paths still accept
// a trailing slash.
func TestAnObjectNameEndingInASlashIsKeptWhileContainersAcceptOne(t *testing.T) {
	srv, err := sim.Start(context.Background(), sim.Options{Services: []string{"objectstorage"}})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	conn := srv.Connections()["objectstorage"]
	tok := conn["token"].(string)
	x := h{t: t, base: conn["base_url"].(string) + "/v1/AUTH_" + conn["tenant_id"].(string)}

	r, _ := x.do("PUT", "/c/", tok, "")
	require.Equal(t, 201, r.StatusCode)
	r, _ = x.do("PUT", "/c/logs/", tok, "")
	require.Equal(t, 201, r.StatusCode)
	r, _ = x.do("PUT", "/c/logs", tok, "file")
	require.Equal(t, 201, r.StatusCode)
	r, body := x.do("GET", "/c/logs/", tok, "")
	require.Equal(t, 200, r.StatusCode)
	assert.Empty(t, body, `"logs/" is its own (empty) object, not "logs"`)
	r, body = x.do("GET", "/c/", tok, "")
	require.Equal(t, 200, r.StatusCode)
	assert.Equal(t, "logs\nlogs/\n", body)
	r, body = x.do("GET", "/", tok, "")
	require.Equal(t, 200, r.StatusCode)
	assert.Equal(t, "c\n", body)
}
