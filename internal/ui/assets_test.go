package ui_test

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var assetRef = regexp.MustCompile(`\.Asset "([^"]+)"`)

// The UI has no build step: templates/ and static/ are the sources and
// what is embedded and served, so nothing built can be stale. This test
// keeps it so: every asset a template names exists, every file of
// static/ is used, none loads code or styles from another site, and what
// is served is the file in the repository.
func TestAssetsAreTheSourcesAndAllUsed(t *testing.T) {
	templates, err := filepath.Glob("templates/*.html")
	require.NoError(t, err)
	used := map[string]bool{}
	for _, f := range templates {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range assetRef.FindAllStringSubmatch(string(b), -1) {
			used[m[1]] = true
			_, err := os.Stat(filepath.Join("static", m[1]))
			assert.NoError(t, err, "%s names a missing asset", f)
		}
		assert.NotRegexp(t, `(?i)(src|href)="https?://`, string(b), "%s loads something from another site", f)
	}
	static, err := os.ReadDir("static")
	require.NoError(t, err)
	for _, f := range static {
		assert.True(t, used[f.Name()], "static/%s is embedded but no template uses it", f.Name())
		b, err := os.ReadFile(filepath.Join("static", f.Name()))
		require.NoError(t, err)
		text := strings.ReplaceAll(string(b), `xmlns="http://www.w3.org/2000/svg"`, "") // a namespace, not a fetch
		assert.NotRegexp(t, `https?://`, text, "static/%s refers to another site", f.Name())
	}

	e := startServer(t, map[string]string{"demo.yaml": demoPlaybook})
	e.signedIn()
	page := e.get("/runs").body
	for name := range used {
		m := regexp.MustCompile(`/ui/static/` + regexp.QuoteMeta(name) + `\?v=[0-9a-f]+`).FindString(page)
		require.NotEmpty(t, m, "the layout links %s with its version", name)
		p := e.get(m)
		require.Equal(t, http.StatusOK, p.status)
		want, err := os.ReadFile(filepath.Join("static", name))
		require.NoError(t, err)
		assert.Equal(t, string(want), p.body, "%s is served as it is in the repository", name)
		assert.Contains(t, p.header.Get("Cache-Control"), "immutable", "a versioned asset is cached for good")
		assert.False(t, strings.HasPrefix(p.header.Get("Content-Type"), "application/octet-stream"))
	}
	assert.Equal(t, http.StatusNotFound, e.get("/ui/static/nope.js").status)
}
