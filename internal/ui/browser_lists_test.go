package ui_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// liveCutter is a reverse proxy in front of a server, as a team's own
// proxy is, that can take the stream of run changes (/live) down: its
// open streams end, and new ones either lose their connection or are
// answered 502, as a proxy answers while its upstream is away.
type liveCutter struct {
	url string

	mu      sync.Mutex
	mode    string // "": passed through; "drop": connection closed; "502"
	streams map[*http.Request]context.CancelFunc
}

func newLiveCutter(t *testing.T, upstream string) *liveCutter {
	t.Helper()
	to, err := url.Parse(upstream)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(to)
	proxy.FlushInterval = -1
	c := &liveCutter{streams: map[*http.Request]context.CancelFunc{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/live" {
			proxy.ServeHTTP(w, r)
			return
		}
		c.mu.Lock()
		mode := c.mode
		ctx, cancel := context.WithCancel(r.Context())
		r = r.WithContext(ctx)
		if mode == "" {
			c.streams[r] = cancel
		}
		c.mu.Unlock()
		defer func() {
			c.mu.Lock()
			delete(c.streams, r)
			c.mu.Unlock()
			cancel()
		}()
		switch mode {
		case "drop":
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		case "502":
			http.Error(w, "upstream unavailable", http.StatusBadGateway)
		default:
			proxy.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() }) // the browser's streams, kept alive
	c.url = srv.URL
	return c
}

// set changes what /live gets and ends the streams open through the proxy.
func (c *liveCutter) set(mode string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mode = mode
	if mode != "" {
		for _, cancel := range c.streams {
			cancel()
		}
	}
}

// checkListsPollWhileTheirStreamIsDown: while the stream of run changes
// is down — its connection lost, or a proxy answering 502 — the runs list
// polls, so a new run still shows; once the stream is back the list
// follows it again and stops polling. b is signed in to serve.
func checkListsPollWhileTheirStreamIsDown(t *testing.T, b *browser, serve string) {
	cut := newLiveCutter(t, serve)
	base := b.base
	b.base = cut.url // the session cookie is the host's, whatever the port
	defer func() {
		b.t = t
		b.base = base
		b.open("/runs") // leave the proxy's page, and its stream
	}()
	for _, mode := range []string{"drop", "502"} {
		t.Run(map[string]string{"drop": "its connection lost", "502": "answered 502"}[mode], func(t *testing.T) {
			b.t = t
			defer cut.set("")
			b.open("/runs")
			b.waitFor(`html[data-list-live="stream"] table.list`)
			cut.set(mode)
			b.waitFor(`html[data-list-live="polling"]`)
			id := startByAPI(t, serve, "ui-each")
			b.waitFor(`tr[data-href="/runs/` + id + `"] .st-succeeded`) // read by polling: the stream is down

			cut.set("")
			b.waitFor(`html[data-list-live="stream"]`)
			id = startByAPI(t, serve, "ui-each")
			b.waitFor(`tr[data-href="/runs/` + id + `"] .st-succeeded`)
		})
	}
}
