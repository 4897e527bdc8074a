package httpcall

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWatchSeesEveryAttemptWithoutItsQuery(t *testing.T) {
	s := newServer(t, step{status: 503}, step{status: 200, body: "ok"})
	var mu sync.Mutex
	var seen []Attempt
	ctx := Watch(context.Background(), func(a Attempt) {
		mu.Lock()
		seen = append(seen, a)
		mu.Unlock()
	})
	c := Call{
		Op: "GET /thing",
		Request: func(ctx context.Context) (*http.Request, error) {
			return http.NewRequestWithContext(ctx, "GET", s.URL+"/v1/things/a%20b?token=s3cr3t&x=1", nil)
		},
	}
	resp, err := Do(ctx, (&recorder{}).policy(), c)
	require.NoError(t, err)
	resp.Body.Close()

	require.Len(t, seen, 2)
	assert.Equal(t, Attempt{Method: "GET", Path: "/v1/things/a%20b", Status: 503, N: 1}, withoutTook(seen[0]))
	assert.Equal(t, Attempt{Method: "GET", Path: "/v1/things/a%20b", Status: 200, N: 2}, withoutTook(seen[1]))
	for _, a := range seen {
		assert.NotContains(t, a.String(), "s3cr3t")
		assert.Positive(t, a.Took)
	}
	assert.True(t, strings.HasPrefix(seen[1].String(), "GET /v1/things/a%20b 200 "), seen[1].String())
	assert.True(t, strings.HasSuffix(seen[1].String(), " (attempt 2)"), seen[1].String())

	t.Run("a call that gets no answer says so", func(t *testing.T) {
		h := newServer(t, step{hangUp: true})
		var got []Attempt
		ctx := Watch(context.Background(), func(a Attempt) { got = append(got, a) })
		_, err := Do(ctx, Policy{Attempts: 1}, call(h, "POST", "x", nil))
		require.Error(t, err)
		require.Len(t, got, 1)
		assert.Equal(t, 0, got[0].Status)
		assert.Contains(t, got[0].String(), "POST /thing no answer ")
	})
	t.Run("a call without a watcher reports nothing and works", func(t *testing.T) {
		resp, err := Do(context.Background(), Policy{}, call(newServer(t, step{status: 200}), "GET", "", nil))
		require.NoError(t, err)
		_ = resp
	})
}

func withoutTook(a Attempt) Attempt {
	a.Took = 0
	return a
}
