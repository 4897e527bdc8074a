package objectstorage_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/sim"
	_ "github.com/runbook/runbook/internal/sim/identity"
	simobs "github.com/runbook/runbook/internal/sim/objectstorage"
)

type h struct {
	t     *testing.T
	base  string
	token string
}

func (x h) do(method, path, token, body string, hdr ...string) (*http.Response, string) {
	x.t.Helper()
	req, err := http.NewRequest(method, x.base+path, strings.NewReader(body))
	require.NoError(x.t, err)
	if token != "" {
		req.Header.Set("X-Auth-Token", token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(x.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestSwiftOverHTTP(t *testing.T) {
	srv, err := sim.Start(context.Background(), sim.Options{Services: []string{"objectstorage"}})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	conn := srv.Connections()["objectstorage"]
	tok, _ := conn["token"].(string)
	require.NotEmpty(t, tok, "without identity on the server, the connection carries the static token")
	x := h{t: t, base: conn["base_url"].(string) + "/v1/AUTH_" + conn["tenant_id"].(string)}

	t.Run("calls without a valid token are 401", func(t *testing.T) {
		r, _ := x.do("GET", "/c", "", "")
		assert.Equal(t, 401, r.StatusCode)
		r, _ = x.do("GET", "/c", "forged", "")
		assert.Equal(t, 401, r.StatusCode)
	})
	t.Run("a PUT into a missing container is 404, then 201 once it exists", func(t *testing.T) {
		r, _ := x.do("PUT", "/c/a/b.txt", tok, "hello")
		assert.Equal(t, 404, r.StatusCode)
		r, _ = x.do("PUT", "/c", tok, "")
		assert.Equal(t, 201, r.StatusCode)
		r, _ = x.do("PUT", "/c", tok, "")
		assert.Equal(t, 202, r.StatusCode)
		r, _ = x.do("PUT", "/c/a/b.txt", tok, "hello", "Content-Type", "text/plain")
		assert.Equal(t, 201, r.StatusCode)
		assert.Equal(t, "5d41402abc4b2a76b9719d911017c592", r.Header.Get("ETag"))
	})
	t.Run("a PUT whose ETag does not match is 422 and stores nothing", func(t *testing.T) {
		r, _ := x.do("PUT", "/c/bad", tok, "hello", "ETag", "00000000000000000000000000000000")
		assert.Equal(t, 422, r.StatusCode)
		r, _ = x.do("HEAD", "/c/bad", tok, "")
		assert.Equal(t, 404, r.StatusCode)
	})
	t.Run("GET returns the bytes, ETag and length", func(t *testing.T) {
		r, body := x.do("GET", "/c/a/b.txt", tok, "")
		assert.Equal(t, 200, r.StatusCode)
		assert.Equal(t, "hello", body)
		assert.Equal(t, "5", r.Header.Get("Content-Length"))
		assert.Equal(t, "text/plain", r.Header.Get("Content-Type"))
		assert.Equal(t, "5d41402abc4b2a76b9719d911017c592", r.Header.Get("ETag"))
	})
	t.Run("listing honours prefix, delimiter, marker and limit", func(t *testing.T) {
		store := srv.Service("objectstorage").(*simobs.Service).Store()
		for _, n := range []string{"a/c.txt", "a/d/e.txt", "z"} {
			store.Put(conn["tenant_id"].(string), "c", n, []byte(n), "")
		}
		var page []map[string]any
		r, body := x.do("GET", "/c?format=json&prefix=a/&delimiter=/", tok, "")
		require.Equal(t, 200, r.StatusCode)
		require.NoError(t, json.Unmarshal([]byte(body), &page))
		require.Len(t, page, 3)
		assert.Equal(t, "a/b.txt", page[0]["name"])
		assert.Equal(t, "a/d/", page[2]["subdir"])
		assert.EqualValues(t, 5, page[0]["bytes"])

		r, body = x.do("GET", "/c?limit=2&marker=a/b.txt", tok, "")
		assert.Equal(t, 200, r.StatusCode)
		assert.Equal(t, "a/c.txt\na/d/e.txt\n", body)
		r, _ = x.do("GET", "/c?limit=10001", tok, "")
		assert.Equal(t, 412, r.StatusCode)
		r, _ = x.do("GET", "/c?prefix=nothing", tok, "")
		assert.Equal(t, 204, r.StatusCode)
	})
	t.Run("DELETE removes, then 404; a non-empty container is 409", func(t *testing.T) {
		r, _ := x.do("DELETE", "/c/z", tok, "")
		assert.Equal(t, 204, r.StatusCode)
		r, _ = x.do("DELETE", "/c/z", tok, "")
		assert.Equal(t, 404, r.StatusCode)
		r, _ = x.do("DELETE", "/c", tok, "")
		assert.Equal(t, 409, r.StatusCode)
		r, _ = x.do("GET", "/missing?format=json", tok, "")
		assert.Equal(t, 404, r.StatusCode)
	})
	t.Run("every call is journaled", func(t *testing.T) {
		assert.NotEmpty(t, srv.Journal.Calls("objectstorage", "PUT", "/v1/AUTH_"))
	})
}
