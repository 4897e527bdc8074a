package sim

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type echo struct{ env *Env }

func (e echo) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow-end" { // the whole answer is out before the handler returns
			body := `{"pad":"` + strings.Repeat("x", 8<<10) + `"}`
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			_, _ = io.WriteString(w, body)
			_ = http.NewResponseController(w).Flush()
			time.Sleep(50 * time.Millisecond)
			return
		}
		WriteJSON(w, http.StatusOK, map[string]any{"path": r.URL.Path, "now": e.env.Clock.Now()})
	})
}

func (e echo) Connection(base string) map[string]any {
	return map[string]any{"base_url": base, "token": "t"}
}

func init() { Register("echo", func(env *Env) (Service, error) { return echo{env}, nil }) }

func start(t *testing.T) *Server {
	t.Helper()
	s, err := Start(context.Background(), Options{Services: []string{"echo"}, Speed: 60})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServicesAreMountedUnderTheirNameOnLoopback(t *testing.T) {
	s := start(t)
	assert.True(t, strings.HasPrefix(s.Addr(), "127.0.0.1:"))
	code, body := get(t, s.URL("echo")+"/v1/things?x=1")
	assert.Equal(t, 200, code)
	assert.Contains(t, body, `"path":"/v1/things"`)
	calls := s.Journal.Calls("echo", "GET", "/v1/")
	require.Len(t, calls, 1)
	assert.Equal(t, "x=1", calls[0].Query)
	assert.Equal(t, s.URL("echo"), s.Connections()["echo"]["base_url"])
}

// TestACallIsJournaledBeforeItsAnswerArrives: a client that has read an
// answer finds its call in the journal, even
// when the handler is still running after its answer went out.
func TestACallIsJournaledBeforeItsAnswerArrives(t *testing.T) {
	s := start(t)
	for i := range 3 {
		code, _ := get(t, s.URL("echo")+"/slow-end")
		require.Equal(t, http.StatusOK, code)
		require.Len(t, s.Journal.Calls("echo", "GET", "/slow-end"), i+1, "call %d", i+1)
	}
}

func TestABodyOverTheLimitIsRefusedWhole(t *testing.T) {
	s := start(t)
	resp, err := http.Post(s.URL("echo")+"/upload", "application/octet-stream", bytes.NewReader(make([]byte, MaxRequestBody+1)))
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	assert.Contains(t, string(b), "32 MiB")
	calls := s.Journal.Calls("echo", "POST", "/upload")
	require.Len(t, calls, 1)
	assert.Equal(t, http.StatusRequestEntityTooLarge, calls[0].Status)
}

func TestInjectedFaultsAnswerBeforeTheServiceAndRunOut(t *testing.T) {
	s := start(t)
	s.Faults.Add(Fault{Service: "echo", PathPrefix: "/v1/", Status: 429, Count: 2, RetryAfter: 3})
	for i := 0; i < 2; i++ {
		code, _ := get(t, s.URL("echo")+"/v1/x")
		assert.Equal(t, 429, code)
	}
	code, _ := get(t, s.URL("echo")+"/v1/x")
	assert.Equal(t, 200, code, "the fault applied to two calls only")
	calls := s.Journal.Calls("echo", "", "")
	require.Len(t, calls, 3)
	assert.Equal(t, "injected 429", calls[0].Fault)
}

func TestTheClockRunsFasterAndCanBeAdvanced(t *testing.T) {
	c := NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 3600)
	t0 := c.Now()
	time.Sleep(20 * time.Millisecond)
	assert.GreaterOrEqual(t, c.Now().Sub(t0), time.Minute, "20 ms real is over a simulated minute at 3600x")
	before := c.Now()
	c.Advance(48 * time.Hour)
	assert.GreaterOrEqual(t, c.Now().Sub(before), 48*time.Hour)
	assert.Equal(t, 10*time.Millisecond, c.Real(36*time.Second))
}

func TestAdminRoutesReadTheJournalAndMoveTheClock(t *testing.T) {
	s := start(t)
	get(t, s.URL("echo")+"/a")
	code, body := get(t, "http://"+s.Addr()+"/_sim/journal?service=echo")
	assert.Equal(t, 200, code)
	assert.Contains(t, body, `"path":"/a"`)
	before := s.Clock.Now()
	resp, err := http.Post("http://"+s.Addr()+"/_sim/clock", "application/json", strings.NewReader(`{"advance":"2h"}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	assert.GreaterOrEqual(t, s.Clock.Now().Sub(before), 2*time.Hour)
}

func TestStartRefusesAnUnknownService(t *testing.T) {
	_, err := Start(context.Background(), Options{Services: []string{"nope"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `no service "nope"`)
}

type exactEcho struct{ echo }

func (exactEcho) ExactPaths() {}

func init() {
	Register("exact", func(env *Env) (Service, error) { return exactEcho{echo{env}}, nil })
}

func TestATrailingSlashReachesTheRouteWithoutItAndIsJournaledAsSent(t *testing.T) {
	s, err := Start(context.Background(), Options{Services: []string{"echo", "exact"}})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	for _, tc := range []struct{ name, service, path, seen string }{
		{"a collection with a slash", "echo", "/v1/clusters/", "/v1/clusters"},
		{"a nested collection with a slash", "echo", "/v1/clusters/c1/nodegroups/", "/v1/clusters/c1/nodegroups"},
		{"a path without one", "echo", "/v1/clusters", "/v1/clusters"},
		{"the root", "echo", "/", "/"},
		{"a service that keeps exact paths", "exact", "/v1/AUTH_t/c/dir/", "/v1/AUTH_t/c/dir/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.Journal.Reset()
			code, body := get(t, s.URL(tc.service)+tc.path)
			require.Equal(t, 200, code)
			assert.Contains(t, body, `"path":"`+tc.seen+`"`)
			calls := s.Journal.Calls(tc.service, "", "")
			require.Len(t, calls, 1)
			assert.Equal(t, tc.path, calls[0].Path, "the journal keeps the path as the client sent it")
		})
	}
}
