package httpcall

import (
	"context"
	"fmt"
	"time"
)

// Attempt describes one attempt of a call for a watcher (a step's output):
// what was asked and how it ended, never headers, bodies or the query
// string, which may carry credentials.
type Attempt struct {
	Method string
	Path   string        // the URL's path, without its query
	Status int           // the answer's status; 0: no answer
	Took   time.Duration // from sending to the answer (or the failure)
	N      int           // 1 for the first attempt
}

// String renders the attempt as a log line: "GET /v1/clusters 200 41ms",
// "POST /v1/clusters no answer 30s (attempt 2)".
func (a Attempt) String() string {
	status := "no answer"
	if a.Status != 0 {
		status = fmt.Sprint(a.Status)
	}
	s := fmt.Sprintf("%s %s %s %s", a.Method, a.Path, status, roundTook(a.Took))
	if a.N > 1 {
		s += fmt.Sprintf(" (attempt %d)", a.N)
	}
	return s
}

func roundTook(d time.Duration) time.Duration {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond)
	case d < time.Second:
		return d.Round(time.Millisecond)
	}
	return d.Round(10 * time.Millisecond)
}

type watchKey struct{}

// Watch returns a context under which Do reports every attempt of every
// call to fn (the step layer passes a step's output). fn must be quick.
func Watch(ctx context.Context, fn func(Attempt)) context.Context {
	return context.WithValue(ctx, watchKey{}, fn)
}

// watched reports an attempt to the context's watcher, if any.
func watched(ctx context.Context, a Attempt) {
	if fn, ok := ctx.Value(watchKey{}).(func(Attempt)); ok && fn != nil {
		fn(a)
	}
}
