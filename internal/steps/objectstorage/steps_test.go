package objectstorage_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/sim"
	_ "github.com/runbook/runbook/internal/sim/identity"
	simobs "github.com/runbook/runbook/internal/sim/objectstorage"
	"github.com/runbook/runbook/internal/steps"
	_ "github.com/runbook/runbook/internal/steps/objectstorage"
	"github.com/runbook/runbook/internal/steps/stepstest"
)

func desc(t *testing.T, name string) *steps.Descriptor {
	t.Helper()
	d, ok := steps.Lookup(name)
	require.True(t, ok, "step type %s is registered", name)
	return d
}

const host = "kr1-api-object-storage.nhncloudservice.com"

// TestUploadAndDownloadHaveAnExample checks that both step types carry an
// example. (The contract suite runs over every registered type, with its
// example, in internal/steps/all.)
func TestUploadAndDownloadHaveAnExample(t *testing.T) {
	for _, name := range []string{"objectstorage.upload", "objectstorage.download"} {
		require.NotNil(t, desc(t, name).Example, "%s has an example", name)
	}
}

func TestUploadIsMutatingAndDownloadIsNot(t *testing.T) {
	up := desc(t, "objectstorage.upload")
	assert.True(t, up.Mutating)
	assert.NotNil(t, up.Reconcile)
	assert.False(t, desc(t, "objectstorage.download").Mutating)
}

func TestLoadTimeChecksExplainWhatIsWrong(t *testing.T) {
	good := "obs://" + host + "/v1/AUTH_t/c/o"
	cases := []struct {
		name, step string
		with       map[string]any
		want       string
	}{
		{"an upload path that climbs out is refused", "objectstorage.upload",
			map[string]any{"uri": good, "path": "../secrets"}, "path: must be a relative path inside the playbook directory"},
		{"an absolute upload path is refused", "objectstorage.upload",
			map[string]any{"uri": good, "path": "/etc/passwd"}, "path: must be a relative path"},
		{"a download dir that climbs out is refused", "objectstorage.download",
			map[string]any{"uri": good, "dir": "a/../../b"}, "dir: must be a relative path"},
		{"a URI without AUTH_ is refused", "objectstorage.download",
			map[string]any{"uri": "obs://" + host + "/v1/tenant/c/o"}, "the account must be AUTH_{tenant}"},
		{"a URI of another scheme is refused", "objectstorage.upload",
			map[string]any{"uri": "s3://bucket/key", "path": "f"}, "uri"},
		{"a URI longer than 255 characters is refused", "objectstorage.download",
			map[string]any{"uri": good + "/" + string(make([]byte, 250))}, "uri"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ps := desc(t, c.step).CheckLiteral(c.with)
			require.NotEmpty(t, ps)
			assert.Contains(t, fmt.Sprint(ps), c.want)
		})
	}
	t.Run("expression values are checked at run time, not load time", func(t *testing.T) {
		assert.Empty(t, desc(t, "objectstorage.upload").CheckLiteral(map[string]any{"uri": steps.Dynamic{}, "path": steps.Dynamic{}}))
	})
}

type env struct {
	srv    *sim.Server
	store  *simobs.Store
	tenant string
	conn   map[string]any
}

func start(t *testing.T) *env {
	t.Helper()
	srv, err := sim.Start(context.Background(), sim.Options{Services: []string{"identity", "objectstorage"}})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	svc := srv.Service("objectstorage").(*simobs.Service)
	return &env{srv: srv, store: svc.Store(), tenant: svc.Tenant(), conn: srv.Connections()["objectstorage"]}
}

func (e *env) uri(rest string) string {
	return fmt.Sprintf("obs://%s/v1/AUTH_%s/%s", host, e.tenant, rest)
}

// call builds a call of step with the simulator's connection, in dir.
func (e *env) call(t *testing.T, step, dir string, with map[string]any) (*steps.Descriptor, *steps.Call) {
	t.Helper()
	d := desc(t, step)
	require.Empty(t, d.CheckLiteral(with))
	c := stepstest.NewCall(t, d, with)
	c.Dir = dir
	stepstest.HostOf(c).Connections["objectstorage"] = e.conn
	return d, c
}

func TestUploadThenDownloadADirectory(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	dir := t.TempDir()
	files := map[string]string{"model/weights.bin": "\x00\x01\x02weights", "model/conf/params.json": `{"lr":0.1}`}
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
		require.NoError(t, os.WriteFile(p, []byte(data), 0o600))
	}

	d, c := e.call(t, "objectstorage.upload", dir, map[string]any{"uri": e.uri("models/run-1/"), "path": "model", "create_container": true})
	out, err := d.Run(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, 2, out["objects"])
	assert.EqualValues(t, len(files["model/weights.bin"])+len(files["model/conf/params.json"]), out["bytes"])
	assert.Equal(t, []any{e.uri("models/run-1/conf/params.json"), e.uri("models/run-1/weights.bin")}, out["uris"])

	d, c = e.call(t, "objectstorage.download", dir, map[string]any{"uri": e.uri("models/run-1/"), "dir": "restored/run-1"})
	out, err = d.Run(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, 2, out["files"])
	assert.Equal(t, []any{"restored/run-1/conf/params.json", "restored/run-1/weights.bin"}, out["paths"])
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(dir, "restored/run-1", filepath.FromSlash(name[len("model/"):])))
		require.NoError(t, err)
		assert.Equal(t, want, string(got))
	}

	t.Run("downloading again without overwrite is a conflict", func(t *testing.T) {
		d, c := e.call(t, "objectstorage.download", dir, map[string]any{"uri": e.uri("models/run-1/"), "dir": "restored/run-1"})
		_, err := d.Run(ctx, c)
		assert.Equal(t, fault.Conflict, fault.CodeOf(err), "%v", err)
	})
	t.Run("a resumed upload whose objects are all stored is adopted", func(t *testing.T) {
		d, c := e.call(t, "objectstorage.upload", dir, map[string]any{"uri": e.uri("models/run-1/"), "path": "model"})
		e.srv.Journal.Reset()
		out, found, err := d.Reconcile(ctx, c, steps.Intent{})
		require.NoError(t, err)
		assert.True(t, found)
		assert.Equal(t, 2, out["objects"])
		assert.Empty(t, e.srv.Journal.Calls("objectstorage", "PUT", ""), "adopting uploads nothing")
	})
	t.Run("a resumed upload with a changed file runs again", func(t *testing.T) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "model/weights.bin"), []byte("new"), 0o600))
		d, c := e.call(t, "objectstorage.upload", dir, map[string]any{"uri": e.uri("models/run-1/"), "path": "model"})
		_, found, err := d.Reconcile(ctx, c, steps.Intent{})
		require.NoError(t, err)
		assert.False(t, found)
	})
}

func TestPathsThatLeaveThePlaybookDirectoryAreRefused(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600))
	dir := t.TempDir()
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "link")))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "linkdir")))
	e.store.Put(e.tenant, "c", "x", []byte("x"), "")

	t.Run("an upload through a symbolic link out is refused", func(t *testing.T) {
		d, c := e.call(t, "objectstorage.upload", dir, map[string]any{"uri": e.uri("c/"), "path": "link"})
		_, err := d.Run(ctx, c)
		assert.Equal(t, fault.Invalid, fault.CodeOf(err), "%v", err)
		assert.Equal(t, []string{"x"}, e.store.List(e.tenant, "c", ""))
	})
	t.Run("a download into a symbolic link out is refused", func(t *testing.T) {
		d, c := e.call(t, "objectstorage.download", dir, map[string]any{"uri": e.uri("c/x"), "dir": "linkdir"})
		_, err := d.Run(ctx, c)
		assert.Equal(t, fault.Invalid, fault.CodeOf(err), "%v", err)
		_, statErr := os.Stat(filepath.Join(outside, "x"))
		assert.True(t, os.IsNotExist(statErr), "nothing written outside")
	})
	t.Run("a path from an expression is checked before the call", func(t *testing.T) {
		d, c := e.call(t, "objectstorage.upload", dir, map[string]any{"uri": e.uri("c/"), "path": "f"})
		// An expression's value reaches the params after load-time checks.
		reflect.ValueOf(c.Params).Elem().FieldByName("Path").SetString("../../etc/passwd")
		_, err := d.Run(ctx, c)
		assert.Equal(t, fault.Invalid, fault.CodeOf(err), "%v", err)
	})
}

func TestAMissingObjectIsNotFound(t *testing.T) {
	e := start(t)
	e.store.CreateContainer(e.tenant, "c")
	d, c := e.call(t, "objectstorage.download", t.TempDir(), map[string]any{"uri": e.uri("c/missing.bin")})
	_, err := d.Run(context.Background(), c)
	assert.Equal(t, fault.NotFound, fault.CodeOf(err), "%v", err)
}

// TestCancellingASlowTransferReturnsPromptly cancels a download while the
// object's answer is held back, after the token was fetched: the contract
// suite (internal/steps/all) cancels during the first call, the token's.
func TestCancellingASlowTransferReturnsPromptly(t *testing.T) {
	e := start(t)
	e.store.Put(e.tenant, "c", "slow", []byte("x"), "")
	e.srv.Faults.Add(sim.Fault{Service: "objectstorage", Latency: 10 * time.Second})
	d, c := e.call(t, "objectstorage.download", t.TempDir(), map[string]any{"uri": e.uri("c/slow")})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(200 * time.Millisecond); cancel() }()
	start := time.Now()
	_, err := d.Run(ctx, c)
	assert.Less(t, time.Since(start), stepstest.Prompt)
	assert.Equal(t, fault.Cancelled, fault.CodeOf(err), "%v", err)
}
