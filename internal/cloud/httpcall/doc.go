// Package httpcall is the one call loop of the cloud clients: it sends a
// call, repeats it when its Policy allows, refreshes a refused credential
// once, and returns the accepted answer or the client's error. The timing
// (backoff with jitter, Retry-After, a sleep that ends with its context)
// comes from internal/retry.
//
// # Main types
//
// A client states its Policy once, where it is built: how many attempts,
// the backoff bounds, which methods may be sent again after an ambiguous
// failure (Repeat), which statuses besides 429 refuse a call before the
// service acts on it (Refused), and how a 401 gets a fresh credential
// (Refresh; RefreshToken serves a token source). Safe (the default) and
// Always are the two Repeat rules in use. Each operation is a Call: Request
// builds the attempt's request afresh (a body read again from its start, a
// current token), Failed reads a failed answer's body into the client's
// error, Read reads an accepted answer. Do runs it.
//
// # What is repeated
//
// Every failed attempt falls in one of four kinds:
//
//   - refused: the service did not act on the call. 429, Policy.Refused, a
//     connection that was never made (dial errors), or an accepted answer
//     whose Read says fault.Throttled. Any call is sent again, POST too.
//   - ambiguous: the service may have acted. 5xx, a timeout, a connection
//     reset or cut short, an accepted answer whose Read says
//     fault.Unavailable. Only a call Policy.Repeat allows is sent again; for
//     any other the error is returned with Data["ambiguous"] = true on its
//     *fault.Error, so the caller can reconcile instead of repeating.
//   - unauthorized: 401. Policy.Refresh is called once per call; when it
//     reports a fresh credential the call is sent again, and that attempt
//     does not count against Policy.Attempts. A second 401 is final.
//   - final: anything else (4xx, an answer that cannot be decoded).
//
// A repeat waits retry.Backoff (exponential, equal jitter, from
// Policy.Backoff up to Policy.MaxBackoff), or the answer's Retry-After when
// it has one, cut to Policy.MaxRetryAfter. Policy.Attempts bounds the
// attempts in all; the error of the last one is returned, prefixed "gave up
// after N attempts" when more than one was made. The error chain keeps the
// client's own error types: errors.As and fault.CodeOf find them.
//
// # Invariants
//
//   - A call that is not repeatable is never sent twice after an ambiguous
//     failure, whatever the attempt bound.
//   - Context end stops the loop at once, during a backoff sleep included;
//     the error wraps the context's error (fault.Cancelled or Timeout).
//   - Errors of Request (a token the source could not get, a file that
//     cannot be opened) end the call unchanged: nothing was sent.
//   - The body of a failed answer is read (at most 1 MiB) and closed here;
//     the body of an accepted answer belongs to Read, or, without Read, to
//     the caller of Do.
package httpcall
