package notice_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	simhc "github.com/runbook/runbook/internal/sim/helpcenter"
	"github.com/runbook/runbook/internal/steps/stepstest"
)

func TestAttachmentDirComputedAtRunTimeMustStayInside(t *testing.T) {
	outside := t.TempDir()
	cases := []struct {
		name, dir string
	}{
		{"a dir that climbs out", "../escaped"},
		{"a dir that climbs out after going down", "sub/../../escaped"},
		{"an absolute dir", filepath.Join(outside, "escaped")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hc := startHelpCenter(t)
			id := hc.add(t, simhc.NewNotice{Title: "files", Attachments: []simhc.NewAttachment{{FileName: "notes.txt", Text: "hello"}}})
			hc.srv.Journal.Reset()
			h := newEngine(t, hc.conn)
			path := filepath.Join(h.dir, "save.yaml")
			require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(`
version: 1
name: save
inputs:
  dir: {type: string, default: %q}
steps:
  - id: save
    uses: notice.attachment
    with: {notice_id: %d, attachment: notes.txt, dir: "${{ inputs.dir }}"}
`, tc.dir, id)), 0o600))
			pb, err := playbook.Load(path, playbook.LoadOptions{})
			require.NoError(t, err, "a computed dir passes the load-time check")
			_, err = h.engine.Run(context.Background(), pb, engine.StartRequest{})
			require.Error(t, err)
			assert.Equal(t, fault.Invalid, fault.CodeOf(err))
			assert.Contains(t, err.Error(), "dir: must be a relative path inside the playbook directory")
			assert.Empty(t, hc.srv.Journal.Calls("helpcenter", "", ""), "refused before asking the help center")
			assert.NoDirExists(t, filepath.Join(h.dir, "..", "escaped"))
			assert.NoDirExists(t, filepath.Join(outside, "escaped"))
		})
	}
}

func TestAttachmentOfExactlyMaxBytesIsSaved(t *testing.T) {
	hc := startHelpCenter(t)
	id := hc.add(t, simhc.NewNotice{Title: "files", Attachments: []simhc.NewAttachment{{FileName: "kb.bin", Data: make([]byte, 1024)}}})
	cases := []struct {
		name     string
		maxBytes int
		err      string
	}{
		{"a file of max_bytes is saved", 1024, ""},
		{"a file one byte over is refused", 1023, "attachment is larger than 1023 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, c := hc.call(t, "notice.attachment", map[string]any{"notice_id": id, "attachment": "kb.bin", "max_bytes": tc.maxBytes})
			out, err := d.Run(context.Background(), c)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				assert.NoFileExists(t, filepath.Join(c.Dir, "kb.bin"))
				return
			}
			require.NoError(t, err)
			assert.EqualValues(t, 1024, out["bytes"])
			fi, err := os.Stat(filepath.Join(c.Dir, "kb.bin"))
			require.NoError(t, err)
			assert.EqualValues(t, 1024, fi.Size())
		})
	}
}

func TestAttachmentWithAnUnsafeNameOnTheServerSaysToSetName(t *testing.T) {
	hc := startHelpCenter(t)
	id := hc.add(t, simhc.NewNotice{Title: "files", Attachments: []simhc.NewAttachment{{FileName: "../../etc/passwd", Text: "root:x:0:0"}}})
	d, c := hc.call(t, "notice.attachment", map[string]any{"notice_id": id, "attachment": "../../etc/passwd"})
	_, err := d.Run(context.Background(), c)
	require.Error(t, err)
	assert.Equal(t, fault.Invalid, fault.CodeOf(err))
	assert.Contains(t, err.Error(), `refusing file name "../../etc/passwd": it leaves the directory (set name to save it under another name)`)
	entries, _ := os.ReadDir(c.Dir)
	assert.Empty(t, entries)
}

// untypedDownloads passes every call to the help center but answers
// attachment downloads without a Content-Type, as some file servers do.
func untypedDownloads(t *testing.T, hc *helpCenter) map[string]any {
	t.Helper()
	target, err := url.Parse(hc.conn["base_url"].(string))
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/notice/attachments/") {
			w = untyped{w}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	conn := map[string]any{}
	for k, v := range hc.conn {
		conn[k] = v
	}
	conn["base_url"] = srv.URL
	return conn
}

type untyped struct{ http.ResponseWriter }

func (w untyped) WriteHeader(code int) {
	w.Header()["Content-Type"] = nil // nil: not sniffed either
	w.ResponseWriter.WriteHeader(code)
}

func TestAttachmentContentType(t *testing.T) {
	cases := []struct {
		name    string
		untyped bool
	}{
		{"as the download names it", false},
		{"as the notice lists it when the download names none", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hc := startHelpCenter(t)
			id := hc.add(t, simhc.NewNotice{Title: "files", Attachments: []simhc.NewAttachment{
				{FileName: "prices.csv", ContentType: "text/csv; charset=utf-8", Text: "item,price\n"}}})
			d, c := hc.call(t, "notice.attachment", map[string]any{"notice_id": id, "attachment": "prices.csv"})
			if tc.untyped {
				stepstest.HostOf(c).Connections["helpcenter"] = untypedDownloads(t, hc)
			}
			out, err := d.Run(context.Background(), c)
			require.NoError(t, err)
			assert.Equal(t, "text/csv; charset=utf-8", out["content_type"])
			b, err := os.ReadFile(filepath.Join(c.Dir, "prices.csv"))
			require.NoError(t, err)
			assert.Equal(t, "item,price\n", string(b))
		})
	}
}
