package objectstorage_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/cloud/objectstorage"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/sim"
	simidentity "github.com/runbook/runbook/internal/sim/identity"
	simobs "github.com/runbook/runbook/internal/sim/objectstorage"
)

type env struct {
	srv    *sim.Server
	client *objectstorage.Client
	store  *simobs.Store
	tenant string
}

// start runs identity and object storage on loopback and a client built
// from the connection the simulator advertises. The URIs use a public
// host: base_url sends them to the simulator.
func start(t *testing.T) *env {
	t.Helper()
	srv, err := sim.Start(context.Background(), sim.Options{Services: []string{"identity", "objectstorage"}})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	cfg, err := objectstorage.ConfigFrom(srv.Connections()["objectstorage"])
	require.NoError(t, err)
	cfg.Identity.Now = srv.Clock.Now
	cfg.Sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	cl, err := objectstorage.New(cfg)
	require.NoError(t, err)
	svc := srv.Service("objectstorage").(*simobs.Service)
	return &env{srv: srv, client: cl, store: svc.Store(), tenant: svc.Tenant()}
}

func (e *env) uri(rest string) string {
	return fmt.Sprintf("obs://kr1-api-object-storage.nhncloudservice.com/v1/AUTH_%s/%s", e.tenant, rest)
}

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
		require.NoError(t, os.WriteFile(p, []byte(data), 0o600))
	}
}

func TestADirectoryRoundTripsThroughTheSimulator(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	e.store.CreateContainer(e.tenant, "data")
	src := t.TempDir()
	files := map[string]string{
		"train/a.csv":         "x,y\n1,2\n",
		"train/deep/b.bin":    string(bytes.Repeat([]byte{0, 1, 2, 255}, 100000)),
		"train/empty.txt":     "",
		"train/with space.md": "# hi",
	}
	writeTree(t, src, files)

	up, err := e.client.Upload(ctx, e.uri("data/datasets/v1/"), filepath.Join(src, "train"), objectstorage.Options{Overwrite: true})
	require.NoError(t, err)
	assert.Len(t, up.Items, 4)
	assert.Equal(t, e.store.List(e.tenant, "data", ""), []string{
		"datasets/v1/a.csv", "datasets/v1/deep/b.bin", "datasets/v1/empty.txt", "datasets/v1/with space.md"})
	got, ok := e.store.Get(e.tenant, "data", "datasets/v1/deep/b.bin")
	require.True(t, ok)
	assert.Equal(t, files["train/deep/b.bin"], string(got))

	dst := t.TempDir()
	down, err := e.client.Download(ctx, e.uri("data/datasets/v1/"), dst, objectstorage.Options{})
	require.NoError(t, err)
	assert.Equal(t, up.Bytes, down.Bytes)
	assert.Equal(t, []string{"a.csv", "deep/b.bin", "empty.txt", "with space.md"}, down.Paths())
	for name, want := range files {
		b, err := os.ReadFile(filepath.Join(dst, filepath.FromSlash(name[len("train/"):])))
		require.NoError(t, err)
		assert.Equal(t, want, string(b), name)
		st, err := os.Stat(filepath.Join(dst, filepath.FromSlash(name[len("train/"):])))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	}

	t.Run("a second download without overwrite is refused before writing", func(t *testing.T) {
		_, err := e.client.Download(ctx, e.uri("data/datasets/v1/"), dst, objectstorage.Options{})
		assert.Equal(t, fault.Conflict, fault.CodeOf(err), "%v", err)
	})
	t.Run("a single object downloads under its base name", func(t *testing.T) {
		d := t.TempDir()
		r, err := e.client.Download(ctx, e.uri("data/datasets/v1/a.csv"), d, objectstorage.Options{})
		require.NoError(t, err)
		assert.Equal(t, []string{"a.csv"}, r.Paths())
	})
}

func TestListingPagesThroughMoreThanOnePage(t *testing.T) {
	e := start(t)
	for i := range 2500 {
		e.store.Put(e.tenant, "many", fmt.Sprintf("p/%05d", i), []byte{byte(i)}, "")
	}
	e.store.Put(e.tenant, "many", "q/other", []byte("x"), "")
	u, err := objectstorage.Parse(e.uri("many/p/"))
	require.NoError(t, err)
	infos, err := e.client.List(context.Background(), u)
	require.NoError(t, err)
	require.Len(t, infos, 2500)
	assert.Equal(t, "p/02499", infos[2499].Name)
	assert.Len(t, e.srv.Journal.Calls("objectstorage", "GET", "/v1/"), 3)
}

func TestARevokedTokenIsReplacedOnce(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	e.store.Put(e.tenant, "c", "o", []byte("data"), "")
	d := t.TempDir()
	_, err := e.client.Download(ctx, e.uri("c/o"), d, objectstorage.Options{})
	require.NoError(t, err)

	e.srv.Service("identity").(*simidentity.Service).Store().Revoke()
	e.srv.Journal.Reset()
	_, err = e.client.Download(ctx, e.uri("c/o"), d, objectstorage.Options{Overwrite: true})
	require.NoError(t, err)
	var statuses []int
	for _, c := range e.srv.Journal.Calls("", "", "") {
		statuses = append(statuses, c.Status)
	}
	assert.Equal(t, []int{401, 200, 200, 200}, statuses, "401, a new token, then HEAD and GET")
}

func TestErrorsAreClassified(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	d := t.TempDir()
	e.store.CreateContainer(e.tenant, "c")

	t.Run("a missing object is not_found", func(t *testing.T) {
		_, err := e.client.Download(ctx, e.uri("c/missing"), d, objectstorage.Options{})
		assert.Equal(t, fault.NotFound, fault.CodeOf(err), "%v", err)
	})
	t.Run("an empty prefix is not_found", func(t *testing.T) {
		_, err := e.client.Download(ctx, e.uri("c/nothing/"), d, objectstorage.Options{})
		assert.Equal(t, fault.NotFound, fault.CodeOf(err), "%v", err)
	})
	t.Run("a missing container on upload is not_found with a hint", func(t *testing.T) {
		f := filepath.Join(d, "f.txt")
		require.NoError(t, os.WriteFile(f, []byte("x"), 0o600))
		_, err := e.client.Upload(ctx, e.uri("nope/f.txt"), f, objectstorage.Options{Overwrite: true})
		assert.Equal(t, fault.NotFound, fault.CodeOf(err), "%v", err)
		assert.Contains(t, err.Error(), "create_container")
		_, err = e.client.Upload(ctx, e.uri("nope/f.txt"), f, objectstorage.Options{Overwrite: true, CreateContainer: true})
		require.NoError(t, err)
		_, ok := e.store.Get(e.tenant, "nope", "f.txt")
		assert.True(t, ok)
	})
	t.Run("wrong credentials are unauthorized", func(t *testing.T) {
		conn := e.srv.Connections()["objectstorage"]
		conn["password"] = "wrong"
		cfg, err := objectstorage.ConfigFrom(conn)
		require.NoError(t, err)
		cl, err := objectstorage.New(cfg)
		require.NoError(t, err)
		_, err = cl.Download(ctx, e.uri("c/o"), d, objectstorage.Options{})
		assert.Equal(t, fault.Unauthorized, fault.CodeOf(err), "%v", err)
	})
	t.Run("503s are retried", func(t *testing.T) {
		e.store.Put(e.tenant, "c", "r", []byte("r"), "")
		e.srv.Faults.Add(sim.Fault{Service: "objectstorage", Method: "GET", Status: http.StatusServiceUnavailable, Count: 2})
		r, err := e.client.Download(ctx, e.uri("c/r"), t.TempDir(), objectstorage.Options{})
		require.NoError(t, err)
		assert.Equal(t, int64(1), r.Bytes)
	})
	t.Run("an object name leaving the directory is refused", func(t *testing.T) {
		e.store.Put(e.tenant, "evil", "x/../../escape", []byte("x"), "")
		dir := t.TempDir()
		_, err := e.client.Download(ctx, e.uri("evil/x/"), filepath.Join(dir, "in"), objectstorage.Options{})
		assert.Equal(t, fault.Invalid, fault.CodeOf(err), "%v", err)
		_, statErr := os.Stat(filepath.Join(dir, "escape"))
		assert.True(t, os.IsNotExist(statErr))
	})
}

func TestUploadWithoutOverwrite(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	e.store.CreateContainer(e.tenant, "c")
	d := t.TempDir()
	f := filepath.Join(d, "f.txt")
	require.NoError(t, os.WriteFile(f, []byte("mine"), 0o600))

	_, err := e.client.Upload(ctx, e.uri("c/f.txt"), f, objectstorage.Options{})
	require.NoError(t, err)
	_, err = e.client.Upload(ctx, e.uri("c/f.txt"), f, objectstorage.Options{})
	require.NoError(t, err, "the same bytes again is not a conflict: an earlier attempt stored them")

	e.store.Put(e.tenant, "c", "f.txt", []byte("theirs"), "")
	_, err = e.client.Upload(ctx, e.uri("c/f.txt"), f, objectstorage.Options{})
	assert.Equal(t, fault.Conflict, fault.CodeOf(err), "%v", err)
	got, _ := e.store.Get(e.tenant, "c", "f.txt")
	assert.Equal(t, "theirs", string(got))
}
