package notice_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/secrets"
	"github.com/runbook/runbook/internal/sim"
	simhc "github.com/runbook/runbook/internal/sim/helpcenter"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
	"github.com/runbook/runbook/internal/steps"
	_ "github.com/runbook/runbook/internal/steps/all"
	"github.com/runbook/runbook/internal/steps/stepstest"
)

// helpCenter is the help-center simulator on loopback.
type helpCenter struct {
	srv  *sim.Server
	svc  *simhc.Service
	conn map[string]any
}

func startHelpCenter(t *testing.T) *helpCenter {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := sim.Start(ctx, sim.Options{Services: []string{"helpcenter"}})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close(); cancel() })
	svc, ok := srv.Service("helpcenter").(*simhc.Service)
	require.True(t, ok)
	return &helpCenter{srv: srv, svc: svc, conn: srv.Connections()["helpcenter"]}
}

func (h *helpCenter) add(t *testing.T, n simhc.NewNotice) int {
	t.Helper()
	id, err := h.svc.AddNotice(n)
	require.NoError(t, err)
	return id
}

// call builds a step call on a TestHost connected to the simulator.
func (h *helpCenter) call(t *testing.T, step string, with map[string]any) (*steps.Descriptor, *steps.Call) {
	t.Helper()
	d := desc(t, step)
	c := stepstest.NewCall(t, d, with)
	stepstest.HostOf(c).Connections["helpcenter"] = h.conn
	return d, c
}

// receiver is a chat webhook that records every post.
type receiver struct {
	*httptest.Server
	mu    sync.Mutex
	posts []post
	fail  int // answer 503 to this many posts first
}

type post struct {
	key  string
	body map[string]any
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		r.mu.Lock()
		r.posts = append(r.posts, post{key: req.Header.Get("Idempotency-Key"), body: m})
		failing := r.fail > 0
		if failing {
			r.fail--
		}
		r.mu.Unlock()
		if failing {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) got() []post {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]post(nil), r.posts...)
}

func TestListReadsEveryPageOnceAndFilters(t *testing.T) {
	hc := startHelpCenter(t)
	hc.svc.Reset(450)
	d, c := hc.call(t, "notice.list", map[string]any{"all": true, "page_size": 200, "limit": 1000})
	out, err := d.Run(context.Background(), c)
	require.NoError(t, err)
	notices := out["notices"].([]any)
	assert.Len(t, notices, 450)
	assert.Equal(t, 450, out["total"])
	assert.Equal(t, 3, out["pages"])
	assert.Equal(t, false, out["truncated"])
	ids := map[any]bool{}
	for _, n := range notices {
		m := n.(map[string]any)
		ids[m["id"]] = true
		_, err := time.Parse(time.RFC3339, m["display_at"].(string))
		assert.NoError(t, err, "display_at is RFC 3339")
		assert.IsType(t, []any{}, m["tags"])
	}
	assert.Len(t, ids, 450, "no notice twice")

	d, c = hc.call(t, "notice.list", map[string]any{"all": true, "page_size": 50, "limit": 120})
	out, err = d.Run(context.Background(), c)
	require.NoError(t, err)
	assert.Len(t, out["notices"], 120)
	assert.Equal(t, true, out["truncated"])

	d, c = hc.call(t, "notice.list", map[string]any{"category_id": 2, "page_size": 200})
	out, err = d.Run(context.Background(), c)
	require.NoError(t, err)
	require.NotEmpty(t, out["notices"])
	for _, n := range out["notices"].([]any) {
		assert.EqualValues(t, 2, n.(map[string]any)["category_id"])
	}
}

func TestGetAndCategoriesAndTags(t *testing.T) {
	hc := startHelpCenter(t)
	id := hc.add(t, simhc.NewNotice{Title: "Spring maintenance", Content: "<p>db</p>", CategoryID: 2, Tags: []int{1},
		Attachments: []simhc.NewAttachment{{FileName: "plan.txt", Text: "the plan"}}})
	d, c := hc.call(t, "notice.get", map[string]any{"id": id, "language": "en"})
	out, err := d.Run(context.Background(), c)
	require.NoError(t, err)
	n := out["notice"].(map[string]any)
	assert.Equal(t, "Spring maintenance", n["title"])
	assert.Equal(t, "<p>db</p>", n["content"])
	require.Len(t, n["attachments"], 1)
	assert.Equal(t, "plan.txt", n["attachments"].([]any)[0].(map[string]any)["file_name"])

	for _, step := range []string{"notice.categories", "notice.tags"} {
		d, c := hc.call(t, step, map[string]any{"language": "ja"})
		out, err := d.Run(context.Background(), c)
		require.NoError(t, err, step)
		assert.Greater(t, out["count"], 0, step)
	}

	d, c = hc.call(t, "notice.get", map[string]any{"id": 999999})
	_, err = d.Run(context.Background(), c)
	require.Error(t, err)
	assert.Equal(t, fault.NotFound, fault.CodeOf(err), "%v", err)
}

func TestAttachmentIsSavedInsideDirAndRefusedWhenUnsafe(t *testing.T) {
	hc := startHelpCenter(t)
	id := hc.add(t, simhc.NewNotice{Title: "files", Attachments: []simhc.NewAttachment{
		{FileName: "notes.txt", Text: "hello"},
		{FileName: "../../etc/passwd", Text: "root:x:0:0"},
		{FileName: "big.bin", Data: make([]byte, 1<<20+1)},
	}})

	t.Run("a file is saved 0600 with its checksum", func(t *testing.T) {
		d, c := hc.call(t, "notice.attachment", map[string]any{"notice_id": id, "attachment": "notes.txt", "dir": "downloads/notices"})
		out, err := d.Run(context.Background(), c)
		require.NoError(t, err)
		assert.Equal(t, filepath.Join("downloads", "notices", "notes.txt"), out["path"])
		assert.EqualValues(t, 5, out["bytes"])
		assert.Equal(t, "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824", out["sha256"])
		fi, err := os.Stat(filepath.Join(c.Dir, "downloads", "notices", "notes.txt"))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		di, err := os.Stat(filepath.Join(c.Dir, "downloads"))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), di.Mode().Perm())

		_, err = d.Run(context.Background(), c)
		require.Error(t, err, "an existing file is kept")
		assert.Contains(t, err.Error(), "overwrite: true")
	})
	t.Run("a server file name that climbs out is refused", func(t *testing.T) {
		d, c := hc.call(t, "notice.attachment", map[string]any{"notice_id": id, "attachment": "../../etc/passwd"})
		_, err := d.Run(context.Background(), c)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `refusing file name "../../etc/passwd": it leaves the directory`)
		assert.Equal(t, fault.Invalid, fault.CodeOf(err))
		entries, _ := os.ReadDir(c.Dir)
		assert.Empty(t, entries, "nothing was written")
	})
	t.Run("the same file saved under a safe name is fine", func(t *testing.T) {
		d, c := hc.call(t, "notice.attachment", map[string]any{"notice_id": id, "attachment": "../../etc/passwd", "name": "passwd.txt"})
		out, err := d.Run(context.Background(), c)
		require.NoError(t, err)
		assert.Equal(t, "passwd.txt", out["path"])
	})
	t.Run("a file over max_bytes is refused and nothing is kept", func(t *testing.T) {
		d, c := hc.call(t, "notice.attachment", map[string]any{"notice_id": id, "attachment": "big.bin", "max_bytes": 1 << 20})
		_, err := d.Run(context.Background(), c)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "attachment is larger than 1048576 bytes")
		entries, _ := os.ReadDir(c.Dir)
		assert.Empty(t, entries)
	})
	t.Run("a dir that is a symbolic link out of the playbook directory is refused", func(t *testing.T) {
		d, c := hc.call(t, "notice.attachment", map[string]any{"notice_id": id, "attachment": "notes.txt", "dir": "out"})
		outside := t.TempDir()
		require.NoError(t, os.Symlink(outside, filepath.Join(c.Dir, "out")))
		_, err := d.Run(context.Background(), c)
		require.Error(t, err)
		entries, _ := os.ReadDir(outside)
		assert.Empty(t, entries, "nothing was written outside")
	})
}

// digestBook posts new notices to url, or writes them to a file.
func digestBook(target string) string {
	return `
version: 1
name: digest
steps:
  - id: digest
    uses: notice.digest
    with:
      ` + target + `
      first_run: none
      format: text
`
}

// engineHarness runs playbooks on the real engine over a bbolt file.
type engineHarness struct {
	t      *testing.T
	dir    string
	store  *bolt.Store
	engine *engine.Engine
}

func newEngine(t *testing.T, conn map[string]any) *engineHarness {
	t.Helper()
	dir := t.TempDir()
	st, err := bolt.Open(filepath.Join(dir, "state.db"), bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	src, err := secrets.NewSource(nil, "")
	require.NoError(t, err)
	e := engine.New(engine.Options{
		Store: st, Secrets: src, Redactor: secrets.NewRedactor(), Environ: []string{},
		Connection: func(name string, _ map[string]any) (map[string]any, error) {
			if name != "helpcenter" {
				return nil, &fault.Error{Code: fault.Invalid, Message: "no connection " + name}
			}
			return conn, nil
		},
		Playbooks: engine.Playbooks{Parse: func(file string, src []byte) (*playbook.Playbook, error) {
			return playbook.Parse(file, src, playbook.LoadOptions{})
		}},
	})
	return &engineHarness{t: t, dir: dir, store: st, engine: e}
}

func (h *engineHarness) run(src string) map[string]any {
	h.t.Helper()
	path := filepath.Join(h.dir, "digest.yaml")
	require.NoError(h.t, os.WriteFile(path, []byte(src), 0o600))
	pb, err := playbook.Load(path, playbook.LoadOptions{})
	require.NoError(h.t, err)
	run, err := h.engine.Run(context.Background(), pb, engine.StartRequest{})
	require.NoError(h.t, err)
	require.Equal(h.t, state.RunSucceeded, run.Status, "run %s: %+v", run.ID, run)
	recs, err := h.store.Steps(context.Background(), run.ID)
	require.NoError(h.t, err)
	for _, r := range recs {
		if r.ID == "digest" {
			return r.Outputs
		}
	}
	h.t.Fatal("no digest step")
	return nil
}

func TestDigestPostsOnlyWhatIsNewAcrossRuns(t *testing.T) {
	hc := startHelpCenter(t)
	rcv := newReceiver(t)
	h := newEngine(t, hc.conn)
	book := digestBook("url: " + rcv.URL)

	out := h.run(book)
	assert.Equal(t, false, out["posted"], "first_run: none remembers where things stand and posts nothing")
	assert.Empty(t, rcv.got())

	a := hc.add(t, simhc.NewNotice{Title: "Maintenance on Saturday", CategoryID: 2})
	b := hc.add(t, simhc.NewNotice{Title: "Old news made current", DisplayDt: "2020.01.01", IsTop: true})
	out = h.run(book)
	assert.Equal(t, true, out["posted"])
	assert.EqualValues(t, 2, out["count"])
	got := rcv.got()
	require.Len(t, got, 1)
	text := got[0].body["text"].(string)
	assert.Contains(t, text, "Maintenance on Saturday")
	assert.Contains(t, text, "Old news made current")
	assert.Contains(t, text, "2 new help-center notices")
	assert.Equal(t, 2, strings.Count(text, "\n- "), "only the two new notices:\n%s", text)
	assert.ElementsMatch(t, []any{float64(a), float64(b)}, toFloats(out["notice_ids"]))
	assert.NotEmpty(t, got[0].key)
	assert.Equal(t, out["idempotency_key"], got[0].key)

	out = h.run(book)
	assert.Equal(t, false, out["posted"], "nothing new: nothing posted")
	assert.EqualValues(t, 0, out["count"])
	assert.Len(t, rcv.got(), 1)

	c := hc.add(t, simhc.NewNotice{Title: "Third"})
	out = h.run(book)
	assert.EqualValues(t, 1, out["count"])
	got = rcv.got()
	require.Len(t, got, 2)
	assert.Contains(t, got[1].body["text"], "Third")
	assert.NotContains(t, got[1].body["text"], "Maintenance on Saturday")
	assert.Equal(t, []any{float64(c)}, toFloats(out["notice_ids"]))
	assert.NotEqual(t, got[0].key, got[1].key)
}

func toFloats(v any) []any {
	var out []any
	for _, x := range v.([]any) {
		switch n := x.(type) {
		case float64:
			out = append(out, n)
		case int64:
			out = append(out, float64(n))
		case int:
			out = append(out, float64(n))
		}
	}
	return out
}

func TestDigestRetriesWithTheSameKeyAndAdvancesOnlyAfterSuccess(t *testing.T) {
	hc := startHelpCenter(t)
	rcv := newReceiver(t)
	rcv.fail = 1
	d, c := hc.call(t, "notice.digest", map[string]any{"url": rcv.URL, "first_run": "none", "format": "markdown"})
	host := stepstest.HostOf(c)
	out, err := d.Run(context.Background(), c)
	require.NoError(t, err)
	require.Equal(t, false, out["posted"])
	key := out["cursor"].(map[string]any)["key"].(string)
	first, _ := host.Cursor(context.Background(), key)
	require.NotNil(t, first)

	hc.add(t, simhc.NewNotice{Title: "New tariff"})
	_, err = d.Run(context.Background(), c)
	require.Error(t, err, "the receiver answered 503")
	assert.True(t, fault.Retryable(err))
	now, _ := host.Cursor(context.Background(), key)
	assert.Equal(t, first, now, "the cursor did not move")

	// The engine's next attempt (or a resumed process) gets the checkpoint.
	hc.add(t, simhc.NewNotice{Title: "Arrived in between"})
	c.Resume, c.Attempt = host.LastCheckpoint(), 2
	out, err = d.Run(context.Background(), c)
	require.NoError(t, err)
	got := rcv.got()
	require.Len(t, got, 2)
	assert.Equal(t, got[0].key, got[1].key, "the same digest, the same key")
	assert.Equal(t, got[0].body, got[1].body)
	assert.NotContains(t, got[1].body["text"], "Arrived in between", "a resumed post sends the digest it promised")
	assert.EqualValues(t, 1, out["count"])
	now, _ = host.Cursor(context.Background(), key)
	assert.NotEqual(t, first, now, "the cursor moved after the post")

	// Resumed after the post was recorded: no second post, the cursor is saved.
	c.Resume, c.Attempt = host.LastCheckpoint(), 3
	out2, found, err := d.Reconcile(context.Background(), c, steps.Intent{})
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, out["idempotency_key"], out2["idempotency_key"])
	assert.Len(t, rcv.got(), 2)

	// The next digest sees only the notice that arrived in between.
	_, c2 := hc.call(t, "notice.digest", map[string]any{"url": rcv.URL, "format": "text"})
	c2.Host = host
	out, err = d.Run(context.Background(), c2)
	require.NoError(t, err)
	assert.EqualValues(t, 1, out["count"])
	assert.Contains(t, rcv.got()[2].body["text"], "Arrived in between")
}
