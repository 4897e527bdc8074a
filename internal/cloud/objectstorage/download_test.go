package objectstorage_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/cloud/identity"
	"github.com/runbook/runbook/internal/cloud/objectstorage"
	"github.com/runbook/runbook/internal/fault"
)

// corrupting serves one object whose first bad GETs send other bytes than
// its ETag says, as a transfer corrupted on the way would.
func corrupting(t *testing.T, bad int32) (*objectstorage.Client, *atomic.Int32) {
	t.Helper()
	good := []byte("good bytes")
	sum := md5.Sum(good)
	etag := hex.EncodeToString(sum[:])
	var gets atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", etag)
		w.Header().Set("Content-Length", strconv.Itoa(len(good)))
		if r.Method == http.MethodHead {
			return
		}
		if gets.Add(1) <= bad {
			w.Write([]byte("bad bytes!"))
			return
		}
		w.Write(good)
	}))
	t.Cleanup(srv.Close)
	cl, err := objectstorage.New(objectstorage.Config{BaseURL: srv.URL, Identity: identity.Config{Token: "t"},
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	require.NoError(t, err)
	return cl, &gets
}

const objectURI = "obs://kr1-api-object-storage.nhncloudservice.com/v1/AUTH_t1/c/o.txt"

func TestADownloadFailingItsETagCheckIsFetchedAgainWithinTheAttemptBound(t *testing.T) {
	t.Run("a corrupted transfer is fetched again", func(t *testing.T) {
		cl, gets := corrupting(t, 1)
		dir := t.TempDir()
		res, err := cl.Download(context.Background(), objectURI, dir, objectstorage.Options{})
		require.NoError(t, err)
		assert.Equal(t, int64(10), res.Bytes)
		got, err := os.ReadFile(filepath.Join(dir, "o.txt"))
		require.NoError(t, err)
		assert.Equal(t, "good bytes", string(got))
		assert.EqualValues(t, 2, gets.Load())
	})
	t.Run("one that never matches gives up after four GETs and leaves no file", func(t *testing.T) {
		cl, gets := corrupting(t, 100)
		dir := t.TempDir()
		_, err := cl.Download(context.Background(), objectURI, dir, objectstorage.Options{})
		require.Error(t, err)
		assert.Equal(t, fault.Unavailable, fault.CodeOf(err))
		assert.Contains(t, err.Error(), "gave up after 4 attempts")
		assert.Contains(t, err.Error(), "do not match the ETag")
		assert.EqualValues(t, 4, gets.Load())
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		assert.Empty(t, entries)
	})
}
