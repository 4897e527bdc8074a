package httpcall

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/fault"
)

// step is one scripted answer of the server.
type step struct {
	status     int
	body       string
	retryAfter string
	hangUp     bool // close the connection without answering
	cut        bool // announce a longer body than is sent
}

// server answers its steps in turn (the last one again when they run out)
// and records the requests it saw.
type server struct {
	*httptest.Server
	mu     sync.Mutex
	steps  []step
	seen   []*http.Request
	bodies []string
}

func newServer(t *testing.T, steps ...step) *server {
	t.Helper()
	s := &server{steps: steps}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		i := min(len(s.seen), len(s.steps)-1)
		s.seen = append(s.seen, r)
		s.bodies = append(s.bodies, string(b))
		st := s.steps[i]
		s.mu.Unlock()
		switch {
		case st.hangUp:
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		case st.cut:
			w.Header().Set("Content-Length", "100")
			w.WriteHeader(st.status)
			w.Write([]byte(st.body))
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		if st.retryAfter != "" {
			w.Header().Set("Retry-After", st.retryAfter)
		}
		w.WriteHeader(st.status)
		w.Write([]byte(st.body))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

func (s *server) tokens() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.seen {
		out = append(out, r.Header.Get("X-Token"))
	}
	return out
}

// recorder is a Policy whose sleeps are recorded, not waited.
type recorder struct{ slept []time.Duration }

func (r *recorder) policy() Policy {
	return Policy{
		Attempts: 4, Backoff: 100 * time.Millisecond, MaxBackoff: time.Second, MaxRetryAfter: 10 * time.Second,
		Client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
		Sleep: func(ctx context.Context, d time.Duration) error {
			r.slept = append(r.slept, d)
			return ctx.Err()
		},
	}
}

// call sends method to s with body, reading the answer's body into out.
func call(s *server, method, body string, out *string) Call {
	return Call{
		Op: method + " /thing",
		Request: func(ctx context.Context) (*http.Request, error) {
			return http.NewRequestWithContext(ctx, method, s.URL+"/thing", strings.NewReader(body))
		},
		Read: func(resp *http.Response) error {
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if out != nil {
				*out = string(b)
			}
			return err
		},
	}
}

func TestAGetIsRepeatedAfterServerErrorsUntilItSucceeds(t *testing.T) {
	var rec recorder
	s := newServer(t, step{status: 503}, step{status: 502}, step{status: 200, body: "ok"})
	var got string
	resp, err := Do(context.Background(), rec.policy(), call(s, "GET", "", &got))
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "ok", got)
	assert.Equal(t, 3, s.requests())
	require.Len(t, rec.slept, 2)
	assert.True(t, rec.slept[0] >= 50*time.Millisecond && rec.slept[0] <= 100*time.Millisecond, "first wait %s", rec.slept[0])
	assert.True(t, rec.slept[1] >= 100*time.Millisecond && rec.slept[1] <= 200*time.Millisecond, "second wait %s", rec.slept[1])
}

func TestAttemptsBoundTheCallAndTheErrorSaysSo(t *testing.T) {
	for _, tc := range []struct {
		name     string
		attempts int
		want     int
		gaveUp   bool
	}{
		{"four attempts are four requests", 4, 4, true},
		{"one attempt is no repeat", 1, 1, false},
		{"zero attempts is one", 0, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec recorder
			s := newServer(t, step{status: 503, body: "down"})
			p := rec.policy()
			p.Attempts = tc.attempts
			_, err := Do(context.Background(), p, call(s, "GET", "", nil))
			require.Error(t, err)
			assert.Equal(t, fault.Unavailable, fault.CodeOf(err))
			assert.Equal(t, tc.want, s.requests())
			assert.Len(t, rec.slept, tc.want-1)
			assert.Equal(t, tc.gaveUp, strings.Contains(err.Error(), "gave up after 4 attempts"), err.Error())
		})
	}
}

func TestRetryAfterIsHonouredAndCut(t *testing.T) {
	t.Run("seconds are waited instead of the backoff", func(t *testing.T) {
		var rec recorder
		s := newServer(t, step{status: 429, retryAfter: "3"}, step{status: 200})
		_, err := Do(context.Background(), rec.policy(), call(s, "GET", "", nil))
		require.NoError(t, err)
		assert.Equal(t, []time.Duration{3 * time.Second}, rec.slept)
	})
	t.Run("a longer wait is cut to MaxRetryAfter", func(t *testing.T) {
		var rec recorder
		s := newServer(t, step{status: 503, retryAfter: "3600"}, step{status: 200})
		_, err := Do(context.Background(), rec.policy(), call(s, "GET", "", nil))
		require.NoError(t, err)
		assert.Equal(t, []time.Duration{10 * time.Second}, rec.slept)
	})
	t.Run("the real sleep waits it", func(t *testing.T) {
		s := newServer(t, step{status: 429, retryAfter: "1"}, step{status: 200})
		p := Policy{Attempts: 2, MaxRetryAfter: 40 * time.Millisecond}
		start := time.Now()
		_, err := Do(context.Background(), p, call(s, "GET", "", nil))
		require.NoError(t, err)
		assert.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond)
		assert.Equal(t, 2, s.requests())
	})
}

// tokenCall sends the current token of its source as X-Token; a refused
// token is replaced by the next one (unless the token is static).
type tokenCall struct {
	mu          sync.Mutex
	token       int
	static      bool
	invalidated []string
}

func (tc *tokenCall) Token(context.Context) (string, error) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return "tok-" + string(rune('1'+tc.token)), nil
}

func (tc *tokenCall) Invalidate(token string) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tc.invalidated = append(tc.invalidated, token)
	if !tc.static && token == "tok-"+string(rune('1'+tc.token)) {
		tc.token++
	}
}

func (tc *tokenCall) current() string {
	t, _ := tc.Token(context.Background())
	return t
}

func (tc *tokenCall) call(s *server, method string) Call {
	c := call(s, method, `{"a":1}`, nil)
	build := c.Request
	c.Request = func(ctx context.Context) (*http.Request, error) {
		req, err := build(ctx)
		if err == nil {
			req.Header.Set("X-Token", tc.current())
		}
		return req, err
	}
	return c
}

func TestA401RefreshesTheCredentialOnce(t *testing.T) {
	t.Run("then the call succeeds with the fresh one, and the refused attempt does not count", func(t *testing.T) {
		var rec recorder
		s := newServer(t, step{status: 401}, step{status: 429}, step{status: 201})
		tc := &tokenCall{}
		p := rec.policy()
		p.Attempts = 2
		p.Refresh = RefreshToken(tc, "X-Token")
		_, err := Do(context.Background(), p, tc.call(s, "POST"))
		require.NoError(t, err, "401, then 429 and 201 within two attempts")
		assert.Equal(t, []string{"tok-1", "tok-2", "tok-2"}, s.tokens())
		assert.Equal(t, []string{"tok-1"}, tc.invalidated)
		assert.Len(t, rec.slept, 1, "no wait before the fresh credential is tried")
	})
	t.Run("a second 401 is unauthorized", func(t *testing.T) {
		var rec recorder
		s := newServer(t, step{status: 401})
		tc := &tokenCall{}
		p := rec.policy()
		p.Refresh = RefreshToken(tc, "X-Token")
		_, err := Do(context.Background(), p, tc.call(s, "GET"))
		require.Error(t, err)
		assert.Equal(t, fault.Unauthorized, fault.CodeOf(err))
		assert.Equal(t, 2, s.requests())
		assert.Len(t, tc.invalidated, 1)
	})
	t.Run("a credential that cannot be refreshed is not sent again", func(t *testing.T) {
		var rec recorder
		s := newServer(t, step{status: 401})
		tc := &tokenCall{static: true}
		p := rec.policy()
		p.Refresh = RefreshToken(tc, "X-Token")
		_, err := Do(context.Background(), p, tc.call(s, "GET"))
		assert.Equal(t, fault.Unauthorized, fault.CodeOf(err))
		assert.Equal(t, 1, s.requests())
	})
	t.Run("without Refresh a 401 is final", func(t *testing.T) {
		var rec recorder
		s := newServer(t, step{status: 401})
		_, err := Do(context.Background(), rec.policy(), call(s, "GET", "", nil))
		assert.Equal(t, fault.Unauthorized, fault.CodeOf(err))
		assert.Equal(t, 1, s.requests())
	})
}

func TestAMutatingCallIsNotRepeatedAfterAnAmbiguousFailure(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a POST answered 503", []step{{status: 503}, {status: 201}}},
		{"a POST answered 500", []step{{status: 500}, {status: 201}}},
		{"a POST whose connection is reset", []step{{hangUp: true}, {status: 201}}},
		{"a POST whose answer is cut short", []step{{status: 201, body: "par", cut: true}, {status: 201}}},
	} {
		t.Run(tc.name+" is sent once and marked ambiguous", func(t *testing.T) {
			var rec recorder
			s := newServer(t, tc.steps...)
			_, err := Do(context.Background(), rec.policy(), call(s, "POST", `{"name":"a"}`, nil))
			require.Error(t, err)
			assert.Equal(t, 1, s.requests())
			assert.Empty(t, rec.slept)
			var fe *fault.Error
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, fault.Unavailable, fe.Code)
			assert.Equal(t, true, fe.Data["ambiguous"])
		})
	}
	for _, method := range []string{"PUT", "PATCH", "DELETE"} {
		t.Run("a "+method+" is not repeated by default either", func(t *testing.T) {
			var rec recorder
			s := newServer(t, step{status: 502})
			_, err := Do(context.Background(), rec.policy(), call(s, method, "", nil))
			require.Error(t, err)
			assert.Equal(t, 1, s.requests())
		})
	}
}

func TestAnyCallIsRepeatedWhenTheServiceRefusedIt(t *testing.T) {
	t.Run("a POST answered 429 is sent again with the same body", func(t *testing.T) {
		var rec recorder
		s := newServer(t, step{status: 429, retryAfter: "1"}, step{status: 201, body: "made"})
		var got string
		_, err := Do(context.Background(), rec.policy(), call(s, "POST", `{"name":"a"}`, &got))
		require.NoError(t, err)
		assert.Equal(t, "made", got)
		assert.Equal(t, []string{`{"name":"a"}`, `{"name":"a"}`}, s.bodies)
		assert.Equal(t, []time.Duration{time.Second}, rec.slept)
	})
	t.Run("a status the policy names as a refusal counts as one", func(t *testing.T) {
		var rec recorder
		s := newServer(t, step{status: 413}, step{status: 201})
		p := rec.policy()
		p.Refused = []int{413}
		_, err := Do(context.Background(), p, call(s, "POST", "x", nil))
		require.NoError(t, err)
		assert.Equal(t, 2, s.requests())
	})
	t.Run("a POST that could not connect is sent again", func(t *testing.T) {
		var rec recorder
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := l.Addr().String()
		l.Close() // nothing listens: every dial is refused
		built := 0
		c := Call{Op: "POST /x", Request: func(ctx context.Context) (*http.Request, error) {
			built++
			return http.NewRequestWithContext(ctx, "POST", "http://"+addr+"/x", strings.NewReader("x"))
		}}
		_, err = Do(context.Background(), rec.policy(), c)
		require.Error(t, err)
		assert.Equal(t, fault.Unavailable, fault.CodeOf(err))
		assert.Equal(t, 4, built)
		assert.Contains(t, err.Error(), "gave up after 4 attempts")
	})
	t.Run("a 4xx is final", func(t *testing.T) {
		var rec recorder
		s := newServer(t, step{status: 409, body: "taken"})
		_, err := Do(context.Background(), rec.policy(), call(s, "GET", "", nil))
		assert.Equal(t, fault.Conflict, fault.CodeOf(err))
		assert.Equal(t, 1, s.requests())
	})
}

func TestRepeatableCallsAreRepeatedAfterAmbiguousFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		method string
		repeat func(string) bool
		steps  []step
	}{
		{"a GET after a 503", "GET", nil, []step{{status: 503}, {status: 200}}},
		{"a GET after a reset connection", "GET", nil, []step{{hangUp: true}, {status: 200}}},
		{"a GET whose answer was cut short", "GET", nil, []step{{status: 200, body: "par", cut: true}, {status: 200}}},
		{"a HEAD after a 504", "HEAD", nil, []step{{status: 504}, {status: 200}}},
		{"a POST the policy calls repeatable, after a 503", "POST", Always, []step{{status: 503}, {status: 200}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec recorder
			s := newServer(t, tc.steps...)
			p := rec.policy()
			p.Repeat = tc.repeat
			_, err := Do(context.Background(), p, call(s, tc.method, "", nil))
			require.NoError(t, err)
			assert.Equal(t, 2, s.requests())
		})
	}
}

func TestReadDecidesAboutAnAcceptedAnswer(t *testing.T) {
	read := func(err error) Call {
		return Call{Op: "GET /x", Read: func(resp *http.Response) error { return err }}
	}
	for _, tc := range []struct {
		name     string
		err      error
		requests int
	}{
		{"an unavailable answer is repeated", &fault.Error{Code: fault.Unavailable, Message: "no envelope"}, 3},
		{"a throttled answer is repeated", &fault.Error{Code: fault.Throttled, Message: "slow down"}, 3},
		{"an invalid answer is final", &fault.Error{Code: fault.Invalid, Message: "refused"}, 1},
		{"an error without a code is final", errors.New("cannot decode"), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec recorder
			s := newServer(t, step{status: 200})
			p := rec.policy()
			p.Attempts = 3
			c := read(tc.err)
			c.Request = func(ctx context.Context) (*http.Request, error) {
				return http.NewRequestWithContext(ctx, "GET", s.URL, nil)
			}
			_, err := Do(context.Background(), p, c)
			require.ErrorIs(t, err, tc.err)
			assert.Equal(t, tc.requests, s.requests())
		})
	}
}

func TestAnswersAndFailuresAreTheClients(t *testing.T) {
	t.Run("an accepted status is an answer", func(t *testing.T) {
		var rec recorder
		s := newServer(t, step{status: 404})
		c := call(s, "HEAD", "", nil)
		c.Accept = func(status int) bool { return status == 404 }
		c.Read = nil
		resp, err := Do(context.Background(), rec.policy(), c)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 404, resp.StatusCode)
	})
	t.Run("Failed reads the error body into the client's error", func(t *testing.T) {
		var rec recorder
		s := newServer(t, step{status: 400, body: `{"detail":"bad tag"}`})
		type apiError struct{ error }
		c := call(s, "GET", "", nil)
		c.Failed = func(resp *http.Response, body []byte) error {
			return &fault.Error{Code: fault.Invalid, Err: apiError{errors.New(string(body))}}
		}
		_, err := Do(context.Background(), rec.policy(), c)
		var ae apiError
		require.ErrorAs(t, err, &ae)
		assert.Equal(t, `{"detail":"bad tag"}`, ae.Error())
		assert.Equal(t, fault.Invalid, fault.CodeOf(err))
	})
	t.Run("an error building the request ends the call unchanged", func(t *testing.T) {
		var rec recorder
		s := newServer(t, step{status: 200})
		boom := &fault.Error{Code: fault.Unauthorized, Message: "no token"}
		c := call(s, "GET", "", nil)
		c.Request = func(context.Context) (*http.Request, error) { return nil, boom }
		_, err := Do(context.Background(), rec.policy(), c)
		assert.Same(t, boom, err)
		assert.Equal(t, 0, s.requests())
	})
}

func TestCancellingDuringABackoffReturnsAtOnce(t *testing.T) {
	s := newServer(t, step{status: 503})
	p := Policy{Attempts: 4, Backoff: time.Hour, MaxBackoff: time.Hour} // the real sleep
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(30*time.Millisecond, cancel)
	start := time.Now()
	_, err := Do(ctx, p, call(s, "GET", "", nil))
	assert.Less(t, time.Since(start), 5*time.Second)
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, fault.Cancelled, fault.CodeOf(err))
	assert.Contains(t, err.Error(), "GET /thing")
	assert.Equal(t, 1, s.requests())

	t.Run("a context already ended sends nothing", func(t *testing.T) {
		s := newServer(t, step{status: 200})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := Do(ctx, Policy{Attempts: 4}, call(s, "GET", "", nil))
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, 0, s.requests())
	})
	t.Run("a deadline during the backoff is a timeout", func(t *testing.T) {
		s := newServer(t, step{status: 503})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer cancel()
		_, err := Do(ctx, p, call(s, "GET", "", nil))
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, fault.Timeout, fault.CodeOf(err))
	})
}
