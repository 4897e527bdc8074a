package ui_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The health page drains the server in a real Chromium against a real
// runbook serve: an admin gives a reason and drains it; the page then says
// it is drained, /readyz answers 503 and the form is gone.
func TestBrowserDrainsTheServerFromTheHealthPage(t *testing.T) {
	chromium(t)
	srv := startServe(t, map[string]string{"ui-tick.yaml": browserTick})
	b := newBrowser(t, srv.url)
	b.open("/health")
	b.waitFor(`input[name="token"]`)
	b.do(chromedp.SetValue(chromedp.CSS("#token"), token), chromedp.SetValue(chromedp.CSS("#name"), "ops-alice"),
		chromedp.Submit(chromedp.CSS("#token")))
	b.waitFor(`#drain[data-drain="none"]`)
	assert.Contains(t, b.text("#drain"), "not draining")
	b.shot("health-drain")

	b.do(chromedp.SetValue(chromedp.CSS(`.drain-form input[name="reason"]`), "upgrade to v2"),
		chromedp.SetValue(chromedp.CSS(`.drain-form input[name="grace"]`), "1m"),
		chromedp.Click(chromedp.CSS(".drain-form button")))
	b.waitFor(`#drain[data-drain]:not([data-drain="none"])`)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(b.text("#drain"), "drained") {
		require.True(t, time.Now().Before(deadline), "the page says the server is drained: %s", b.text("#drain"))
		time.Sleep(200 * time.Millisecond)
		b.open("/health")
		b.waitFor("#drain")
	}
	text := b.text("#drain")
	b.shot("health-drained")
	assert.Contains(t, text, ": upgrade to v2", "who drained it and why")
	assert.Contains(t, text, "grace 1m0s")
	assert.Equal(t, "0", b.eval(`String(document.querySelectorAll(".drain-form").length)`), "no drain form once draining")
	resp, err := http.Get(srv.url + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
}
