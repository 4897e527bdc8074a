package httpcall

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/runbook/runbook/internal/egress"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/retry"
)

// Policy is how a client repeats its calls. A client states it once.
type Policy struct {
	// Attempts bounds the attempts of a call, the first included (below
	// 1: one attempt, no repeat).
	Attempts int
	// Backoff and MaxBackoff bound the wait before a repeat: up to Backoff
	// before the second attempt, doubling up to MaxBackoff, equal jitter.
	Backoff, MaxBackoff time.Duration
	// MaxRetryAfter cuts a longer Retry-After (0: one minute).
	MaxRetryAfter time.Duration
	// Repeat reports whether a call of method may be sent again after an
	// ambiguous failure, when the service may have acted on it (nil: Safe).
	Repeat func(method string) bool
	// Refused lists the statuses besides 429 with which the service refuses
	// a call before acting on it: any call is sent again after one.
	Refused []int
	// Refresh is called after a 401, once per call: it drops the credential
	// the refused request carried and reports whether a different one is
	// now available. nil: a 401 is final.
	Refresh func(ctx context.Context, refused *http.Request) bool

	Client *http.Client                                     // nil: http.DefaultClient
	Sleep  func(ctx context.Context, d time.Duration) error // nil: retry.Sleep
	Now    func() time.Time                                 // reads Retry-After dates; nil: time.Now
}

// Safe is the default Repeat: the methods that do not change anything
// (GET, HEAD, OPTIONS, TRACE).
func Safe(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// Always is a Repeat for calls whose repetition is harmless, whatever the
// method (a PUT of the same bytes, an inference, a log line the caller may
// see twice). A client that uses it says why.
func Always(string) bool { return true }

// Tokens is a source of the tokens a client sends (*identity.Source).
type Tokens interface {
	Token(ctx context.Context) (string, error)
	// Invalidate drops token after the service refused it.
	Invalidate(token string)
}

// RefreshToken is a Policy.Refresh for a token sent in header: it drops
// the refused token and reports whether src hands out a different one (a
// static token comes back unchanged and is not resent).
func RefreshToken(src Tokens, header string) func(ctx context.Context, refused *http.Request) bool {
	return func(ctx context.Context, refused *http.Request) bool {
		token := refused.Header.Get(header)
		src.Invalidate(token)
		fresh, err := src.Token(ctx)
		return err == nil && fresh != token
	}
}

// Call is one operation.
type Call struct {
	// Op names the call in errors that no answer names: "GET /v1/clusters".
	Op string
	// Request builds the attempt's request, afresh for each attempt (a
	// body read again from its start, a current token). An error ends the
	// call unchanged.
	Request func(ctx context.Context) (*http.Request, error)
	// Accept reports the statuses besides 2xx that are answers, not
	// failures (a 404 that says "absent"). nil: none.
	Accept func(status int) bool
	// Read reads an accepted answer; it owns resp.Body (Do closes it only
	// when Read fails). An error it returns is the attempt's failure: a
	// *fault.Error coded Throttled or Unavailable, or a connection error,
	// may be repeated (see the package doc); others are final. nil: Do
	// returns the answer with its body unread, for the caller to close.
	Read func(resp *http.Response) error
	// Failed turns a failed answer (not 2xx, not accepted) into the call's
	// error: the client reads its error body here (at most maxErrorBody
	// bytes, already read and closed). nil: a *fault.Error coded by
	// fault.CodeForHTTPStatus.
	Failed func(resp *http.Response, body []byte) error
}

// maxErrorBody bounds what is read of a failed answer.
const maxErrorBody = 1 << 20

// kind sorts a failed attempt (see the package doc).
type kind int

const (
	final        kind = iota
	refused           // the service did not act: any call may be sent again
	ambiguous         // the service may have acted: only a repeatable call is
	unauthorized      // 401: one refresh
)

// Do sends c, repeating it as p allows, and returns the accepted answer
// (its body read by c.Read, or unread without one) or the error of the last
// attempt.
func Do(ctx context.Context, p Policy, c Call) (*http.Response, error) {
	p.defaults()
	refreshed := false
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, cancelled(c.Op, err)
		}
		req, err := c.Request(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, cancelled(c.Op, ctx.Err())
			}
			return nil, err
		}
		sent := time.Now()
		resp, k, err := p.send(c, req)
		watched(ctx, attemptOf(req, resp, sent, attempt))
		switch {
		case err == nil:
			return resp, nil
		case ctx.Err() != nil:
			return nil, cancelled(c.Op, ctx.Err())
		case k == unauthorized && !refreshed && p.Refresh != nil:
			refreshed = true
			if p.Refresh(ctx, req) {
				attempt-- // the refused credential does not count
				continue
			}
			return nil, err
		case k == ambiguous && !p.Repeat(req.Method):
			return nil, markAmbiguous(c.Op, err)
		case k != refused && k != ambiguous:
			return nil, err
		case attempt >= p.Attempts:
			if attempt > 1 {
				return nil, fmt.Errorf("gave up after %d attempts: %w", attempt, err)
			}
			return nil, err
		}
		if err := p.Sleep(ctx, p.wait(attempt, resp)); err != nil {
			return nil, cancelled(c.Op, err)
		}
	}
}

func attemptOf(req *http.Request, resp *http.Response, sent time.Time, n int) Attempt {
	a := Attempt{Method: req.Method, Path: req.URL.EscapedPath(), Took: time.Since(sent), N: n}
	if resp != nil {
		a.Status = resp.StatusCode
	}
	return a
}

func (p *Policy) defaults() {
	if p.Attempts < 1 {
		p.Attempts = 1
	}
	if p.MaxRetryAfter <= 0 {
		p.MaxRetryAfter = time.Minute
	}
	if p.Repeat == nil {
		p.Repeat = Safe
	}
	if p.Client == nil {
		p.Client = http.DefaultClient
	}
	if p.Sleep == nil {
		p.Sleep = retry.Sleep
	}
	if p.Now == nil {
		p.Now = time.Now
	}
}

// send makes one attempt. resp is the answer when there was one (its
// header gives Retry-After); k sorts a failure.
func (p *Policy) send(c Call, req *http.Request) (*http.Response, kind, error) {
	resp, err := p.Client.Do(req)
	if re := (*egress.RefusedError)(nil); errors.As(err, &re) {
		// The destination policy refused it before any packet: final.
		return nil, final, &fault.Error{Code: fault.Invalid, Message: c.Op + ": " + re.Error()}
	}
	if err != nil {
		k := ambiguous
		if notSent(err) {
			k = refused
		}
		return nil, k, &fault.Error{Code: fault.Unavailable, Message: c.Op, Err: err}
	}
	if resp.StatusCode/100 == 2 || (c.Accept != nil && c.Accept(resp.StatusCode)) {
		if c.Read == nil {
			return resp, final, nil
		}
		err := c.Read(resp)
		if err == nil {
			return resp, final, nil
		}
		resp.Body.Close()
		k, err := readFailure(c.Op, err)
		return resp, k, err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	return resp, p.statusKind(resp.StatusCode), c.failed(resp, body)
}

// statusKind sorts a failed answer by its status.
func (p *Policy) statusKind(status int) kind {
	switch {
	case status == http.StatusTooManyRequests || slices.Contains(p.Refused, status):
		return refused
	case status == http.StatusUnauthorized:
		return unauthorized
	case status >= 500:
		return ambiguous
	}
	return final
}

// readFailure sorts an error of Read: by its fault code when it has one,
// else a connection error (the answer cut short) is ambiguous. A connection
// error without a code is given one.
func readFailure(op string, err error) (kind, error) {
	var fe *fault.Error
	if errors.As(err, &fe) {
		switch fe.Code {
		case fault.Throttled:
			return refused, err
		case fault.Unavailable:
			return ambiguous, err
		}
		return final, err
	}
	if connectionError(err) {
		return ambiguous, &fault.Error{Code: fault.Unavailable, Message: op + ": reading the answer", Err: err}
	}
	return final, err
}

// notSent reports a connection that was never made: the request did not
// leave, so the service cannot have acted on it.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func connectionError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}

func (c Call) failed(resp *http.Response, body []byte) error {
	if c.Failed != nil {
		return c.Failed(resp, body)
	}
	return &fault.Error{Code: fault.CodeForHTTPStatus(resp.StatusCode), Data: map[string]any{"http_status": resp.StatusCode},
		Message: fmt.Sprintf("%s: HTTP %d %s", c.Op, resp.StatusCode, http.StatusText(resp.StatusCode))}
}

// wait is the pause before attempt+1: the answer's Retry-After (cut to
// MaxRetryAfter), else the backoff.
func (p *Policy) wait(attempt int, resp *http.Response) time.Duration {
	if resp != nil {
		if ra := retry.After(resp.Header.Get("Retry-After"), p.Now()); ra > 0 {
			return min(ra, p.MaxRetryAfter)
		}
	}
	return retry.Backoff(attempt, p.Backoff, p.MaxBackoff)
}

// markAmbiguous returns err with Data["ambiguous"] = true on its first
// *fault.Error (one is added when it has none).
func markAmbiguous(op string, err error) error {
	var fe *fault.Error
	if !errors.As(err, &fe) {
		fe = &fault.Error{Code: fault.Unavailable, Message: op, Err: err}
		err = fe
	}
	if fe.Data == nil {
		fe.Data = map[string]any{}
	}
	fe.Data["ambiguous"] = true
	return err
}

func cancelled(op string, err error) error { return fmt.Errorf("%s: %w", op, err) }
