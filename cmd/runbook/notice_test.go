package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// crashBin is runbook built with -tags crashpoints: it kills itself with
// SIGKILL at the point RUNBOOK_CRASHPOINT names.
var (
	crashBinOnce sync.Once
	crashBin     string
	crashBinErr  error
)

func buildCrashBin(t *testing.T) string {
	t.Helper()
	crashBinOnce.Do(func() {
		crashBin = filepath.Join(filepath.Dir(bin), "runbook-crashpoints")
		out, err := exec.Command("go", "build", "-tags", "crashpoints", "-o", crashBin, ".").CombinedOutput()
		if err != nil {
			crashBinErr = err
			crashBin = string(out)
		}
	})
	require.NoError(t, crashBinErr, crashBin)
	return crashBin
}

// webhook counts the posts it receives and their idempotency keys.
type webhook struct {
	mu   sync.Mutex
	keys []string
}

func (w *webhook) posts() (total int, distinct map[string]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	distinct = map[string]int{}
	for _, k := range w.keys {
		distinct[k]++
	}
	return len(w.keys), distinct
}

func startWebhook(t *testing.T) (*webhook, string) {
	w := &webhook{}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.mu.Lock()
		w.keys = append(w.keys, r.Header.Get("Idempotency-Key"))
		w.mu.Unlock()
		rw.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return w, srv.URL
}

const digestCrashBook = `
version: 1
name: digest-crash
steps:
  - id: digest
    uses: notice.digest
    with:
      url: %URL%
      first_run: all
      max_notices: 5
      format: text
`

// TestKilledDigestResumesWithoutASecondDigest kills the real binary right
// after the receiver accepted the digest, before the step recorded it
// (notice.digest.posted) or after it recorded it but before the cursor was
// saved (notice.digest.recorded), then resumes the run. The receiver must
// never get a second, different digest: at most a repeat with the same
// Idempotency-Key (which it drops), and none once the post was recorded.
func TestKilledDigestResumesWithoutASecondDigest(t *testing.T) {
	crash := buildCrashBin(t)
	for _, tc := range []struct {
		point     string
		wantPosts int
	}{
		{"notice.digest.posted", 2},   // answer lost: re-sent once, same key
		{"notice.digest.recorded", 1}, // delivery recorded: only the cursor is saved
	} {
		t.Run("killed at "+tc.point, func(t *testing.T) {
			c := newCLI(t)
			hook, url := startWebhook(t)
			pb := c.file("digest.yaml", strings.ReplaceAll(digestCrashBook, "%URL%", url))

			cmd := exec.Command(crash, "run", "--sim", pb)
			cmd.Dir = c.dir
			cmd.Env = append(append([]string(nil), c.env...), "RUNBOOK_CRASHPOINT="+tc.point)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "the process was killed: %s", out)
			m := runIDRe.FindStringSubmatch(string(out))
			require.NotNil(t, m, "run ID in the output:\n%s", out)
			id := m[1]
			total, keys := hook.posts()
			require.Equal(t, 1, total, "the digest reached the receiver before the kill")
			require.Len(t, keys, 1)

			r := c.run("run", "--resume", id, "--sim")
			require.Equal(t, 0, r.code, r)
			total, keys = hook.posts()
			assert.Equal(t, tc.wantPosts, total, r)
			assert.Len(t, keys, 1, "one digest identity: a receiver deduplicating by Idempotency-Key shows it once")
			for k := range keys {
				assert.NotEmpty(t, k)
			}
		})
	}
}

// TestAFileErrorNamesTheResolvedPathAndNoSystemCall: a step that cannot
// write its file names the file as it resolved it (below the playbook's
// directory, not the working one) and why, without the system call's name
// an os.Root error carries (mkdirat, statat).
func TestAFileErrorNamesTheResolvedPathAndNoSystemCall(t *testing.T) {
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "books"), 0o700))
	c.file("books/out", "a file where the directory should be")
	pb := c.file("books/digest.yaml", `version: 1
name: digest
steps:
  - id: digest
    uses: notice.digest
    with: {file: out/digest.md, first_run: all}
`)
	r := c.run("run", "--sim", pb)
	assert.Equal(t, 1, r.code, r)
	dir := filepath.Join(c.dir, "books")
	assert.Contains(t, r.stdout, "create the directory of "+filepath.Join(dir, "out", "digest.md")+": "+filepath.Join(dir, "out")+": file exists")
	assert.NotRegexp(t, `\b(mkdirat|statat|openat)\b`, r.stdout+r.stderr)
}
