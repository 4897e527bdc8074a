package identity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/fault"
)

// fakeIdentity answers POST /v2.0/tokens with token-N that expires
// lifetime after now().
type fakeIdentity struct {
	t         *testing.T
	calls     atomic.Int32
	lifetime  time.Duration
	now       func() time.Time
	status    int           // non-zero: answer this status with a Keystone error body
	gate      chan struct{} // non-nil: wait for it before answering
	abandoned atomic.Int32  // requests whose client went away while gated
}

func (f *fakeIdentity) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := f.calls.Add(1)
	if f.gate != nil {
		_, _ = io.Copy(io.Discard, r.Body) // so that the server notices a client going away
		select {
		case <-f.gate:
		case <-r.Context().Done():
			f.abandoned.Add(1)
			return
		}
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v2.0/tokens" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if f.status != 0 {
		w.WriteHeader(f.status)
		fmt.Fprintf(w, `{"error":{"code":%d,"title":"x","message":"refused by the fake"}}`, f.status)
		return
	}
	exp := f.now().Add(f.lifetime).UTC().Format(time.RFC3339)
	fmt.Fprintf(w, `{"access":{"token":{"id":"token-%d","expires":%q,"tenant":{"id":"t1"}},"serviceCatalog":[]}}`, n, exp)
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func setup(t *testing.T, lifetime time.Duration) (*fakeIdentity, *clock, *httptest.Server, *Source) {
	t.Helper()
	clk := &clock{t: time.Date(2026, 5, 1, 3, 0, 0, 0, time.UTC)}
	f := &fakeIdentity{t: t, lifetime: lifetime, now: clk.Now}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	src, err := New(Config{BaseURL: srv.URL, TenantID: "t1", Username: "ops@example.com", Password: "api-pw", Now: clk.Now})
	require.NoError(t, err)
	return f, clk, srv, src
}

func TestTokenRequestHasTheKeystoneV2Shape(t *testing.T) {
	var got map[string]any
	var method, path, ctype string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method, path, ctype = r.Method, r.URL.Path, r.Header.Get("Content-Type")
		b, _ := io.ReadAll(r.Body)
		require.NoError(t, json.Unmarshal(b, &got))
		fmt.Fprint(w, `{"access":{"token":{"id":"abc","expires":"2099-01-01T00:00:00Z"}}}`)
	}))
	defer srv.Close()
	src, err := New(Config{BaseURL: srv.URL + "/", TenantID: "tenant-1", Username: "ops@example.com", Password: "api-pw"})
	require.NoError(t, err)
	tok, err := src.Token(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "abc", tok)
	assert.Equal(t, http.MethodPost, method)
	assert.Equal(t, "/v2.0/tokens", path)
	assert.Equal(t, "application/json", ctype)
	assert.Equal(t, map[string]any{"auth": map[string]any{
		"tenantId":            "tenant-1",
		"passwordCredentials": map[string]any{"username": "ops@example.com", "password": "api-pw"},
	}}, got)
	assert.Equal(t, time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), src.Expires())
}

func TestTheEndpointIsBuiltFromTheBaseURL(t *testing.T) {
	for _, tc := range []struct{ name, base, want string }{
		{"an empty URL uses the public service", "", DefaultURL + "/v2.0/tokens"},
		{"a host gets /v2.0/tokens", "http://127.0.0.1:1/identity", "http://127.0.0.1:1/identity/v2.0/tokens"},
		{"a /v2.0 URL gets /tokens", "http://h/v2.0/", "http://h/v2.0/tokens"},
		{"a full tokens URL is kept", "http://h/v2.0/tokens", "http://h/v2.0/tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(Config{BaseURL: tc.base, TenantID: "t", Username: "u", Password: "p"})
			require.NoError(t, err)
			assert.Equal(t, tc.want, s.endpoint)
		})
	}
}

func TestATokenIsCachedUntilShortlyBeforeItExpires(t *testing.T) {
	f, clk, _, src := setup(t, time.Hour)
	ctx := context.Background()
	tok, err := src.Token(ctx)
	require.NoError(t, err)
	assert.Equal(t, "token-1", tok)

	clk.Add(54 * time.Minute) // 6 minutes left: still fresh
	tok, err = src.Token(ctx)
	require.NoError(t, err)
	assert.Equal(t, "token-1", tok)
	assert.EqualValues(t, 1, f.calls.Load())

	clk.Add(2 * time.Minute) // 4 minutes left: inside the 5 minute margin
	tok, err = src.Token(ctx)
	require.NoError(t, err)
	assert.Equal(t, "token-2", tok)
	assert.EqualValues(t, 2, f.calls.Load())
}

func TestAShortLivedTokenIsRenewedATenthOfItsLifetimeEarly(t *testing.T) {
	f, clk, _, src := setup(t, 10*time.Minute)
	ctx := context.Background()
	_, err := src.Token(ctx)
	require.NoError(t, err)
	clk.Add(8*time.Minute + 30*time.Second) // 90 s left, margin is 60 s
	tok, _ := src.Token(ctx)
	assert.Equal(t, "token-1", tok)
	clk.Add(time.Minute) // 30 s left
	tok, _ = src.Token(ctx)
	assert.Equal(t, "token-2", tok)
	assert.EqualValues(t, 2, f.calls.Load())
}

func TestConcurrentCallersShareOneRefresh(t *testing.T) {
	f, _, _, src := setup(t, time.Hour)
	f.gate = make(chan struct{})
	const n = 20
	var wg sync.WaitGroup
	toks := make([]string, n)
	for i := range n {
		wg.Go(func() {
			tok, err := src.Token(context.Background())
			assert.NoError(t, err)
			toks[i] = tok
		})
	}
	time.Sleep(20 * time.Millisecond)
	close(f.gate)
	wg.Wait()
	assert.EqualValues(t, 1, f.calls.Load())
	for _, tok := range toks {
		assert.Equal(t, "token-1", tok)
	}
}

func TestAWaiterGivesUpWithItsContextWhileTheRefreshGoesOnForOthers(t *testing.T) {
	f, _, _, src := setup(t, time.Hour)
	f.gate = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := src.Token(ctx); done <- err }()
	other := make(chan string, 1)
	go func() { tok, _ := src.Token(context.Background()); other <- tok }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	err := <-done
	require.ErrorIs(t, err, context.Canceled)
	close(f.gate)
	assert.Equal(t, "token-1", <-other, "the refresh the cancelled caller started still served the other waiter")
	tok, err := src.Token(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "token-1", tok, "and its token is cached")
	assert.EqualValues(t, 1, f.calls.Load())
	assert.Zero(t, f.abandoned.Load())
}

func TestTheLastWaiterGivingUpAbandonsTheFetch(t *testing.T) {
	f, _, _, src := setup(t, time.Hour)
	f.gate = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := src.Token(ctx); done <- err }()
	time.Sleep(10 * time.Millisecond)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Eventually(t, func() bool { return f.abandoned.Load() == 1 }, 2*time.Second, 5*time.Millisecond,
		"the token request is cancelled once nobody waits for it")
	close(f.gate)
	tok, err := src.Token(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "token-2", tok, "the next caller fetches anew")
}

func TestInvalidateRefreshesOnceOnlyForTheCurrentToken(t *testing.T) {
	f, _, _, src := setup(t, time.Hour)
	ctx := context.Background()
	old, _ := src.Token(ctx)
	src.Invalidate(old)
	src.Invalidate(old) // a second caller saw the same 401
	tok, err := src.Token(ctx)
	require.NoError(t, err)
	assert.Equal(t, "token-2", tok)
	src.Invalidate(old) // late: the token was already replaced
	tok, _ = src.Token(ctx)
	assert.Equal(t, "token-2", tok)
	assert.EqualValues(t, 2, f.calls.Load())
}

func TestAStaticTokenIsReturnedAsIs(t *testing.T) {
	src, err := New(Config{Token: "static-1", BaseURL: "http://127.0.0.1:1"})
	require.NoError(t, err)
	src.Invalidate("static-1")
	tok, err := src.Token(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "static-1", tok)
	assert.True(t, src.Static())
}

func TestMissingCredentialsAreInvalid(t *testing.T) {
	_, err := New(Config{TenantID: "t"})
	require.Error(t, err)
	assert.Equal(t, fault.Invalid, fault.CodeOf(err))
	assert.Contains(t, err.Error(), "username, password missing")
}

func TestErrorsAreClassified(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		want   fault.Code
	}{
		{"refused credentials are unauthorized", 401, fault.Unauthorized},
		{"a forbidden answer is unauthorized", 403, fault.Unauthorized},
		{"a rate limit is throttled", 429, fault.Throttled},
		{"a server error is unavailable", 503, fault.Unavailable},
		{"a malformed request is invalid", 400, fault.Invalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _, _, src := setup(t, time.Hour)
			f.status = tc.status
			_, err := src.Token(context.Background())
			require.Error(t, err)
			assert.Equal(t, tc.want, fault.CodeOf(err))
			assert.NotContains(t, err.Error(), "api-pw")
			var se *fault.Error
			require.True(t, errors.As(err, &se))
			assert.Equal(t, tc.status, se.Data["http_status"])
			if tc.status != 404 {
				assert.Contains(t, err.Error(), "refused by the fake")
			}
		})
	}
	t.Run("a network error is unavailable and failures are not cached", func(t *testing.T) {
		f, _, srv, src := setup(t, time.Hour)
		srv.Close()
		_, err := src.Token(context.Background())
		assert.Equal(t, fault.Unavailable, fault.CodeOf(err))
		_, err = src.Token(context.Background())
		assert.Equal(t, fault.Unavailable, fault.CodeOf(err))
		assert.EqualValues(t, 0, f.calls.Load())
	})
}

func TestExpiresFormatsAreRead(t *testing.T) {
	want := time.Date(2026, 5, 1, 15, 0, 0, 0, time.UTC)
	for _, s := range []string{"2026-05-01T15:00:00Z", "2026-05-01T15:00:00.000000Z", "2026-05-01T15:00:00", "2026-05-02T00:00:00+09:00"} {
		t.Run(s+" is read", func(t *testing.T) {
			assert.True(t, want.Equal(parseExpires(s)), parseExpires(s))
		})
	}
	t.Run("garbage is zero", func(t *testing.T) { assert.True(t, parseExpires("soon").IsZero()) })
}

func TestConfigFromReadsTheConnection(t *testing.T) {
	cfg, err := ConfigFrom(map[string]any{"identity_url": " http://h ", "tenant_id": "t", "username": "u", "password": "p", "token": nil})
	require.NoError(t, err)
	assert.Equal(t, Config{BaseURL: "http://h", TenantID: "t", Username: "u", Password: "p"}, cfg)
	_, err = ConfigFrom(map[string]any{"password": 12})
	require.Error(t, err)
	assert.Equal(t, fault.Invalid, fault.CodeOf(err))
	assert.True(t, strings.Contains(err.Error(), "password must be a string"))
}
