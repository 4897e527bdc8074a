package steps

import (
	"bytes"
	"context"
	"io"

	"github.com/runbook/runbook/internal/cloud/httpcall"
)

// Output streams of Call.Print (the engine stores them as state.OutputLine
// streams of the same names).
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
	StreamCall   = "call" // an API call: method, path, status, duration
)

// MaxLineBytes is the longest output line kept whole; a longer one is cut
// into lines of this size.
const MaxLineBytes = 16 << 10

// OutputSink receives a step's output as it is printed, one line at a
// time (no trailing newline). The engine redacts, caps, batches and
// stores the lines in the run's output area and shows them live; a sink
// must be safe for concurrent use and quick: it never blocks on I/O for
// long.
type OutputSink interface {
	Line(stream, text string)
}

// Print sends one line of output to the run's step output; a Call without
// a sink (a test, `runbook call`) drops it.
func (c *Call) Print(stream, text string) {
	if c != nil && c.Output != nil {
		c.Output.Line(stream, text)
	}
}

// OutputWriter returns a writer that cuts what is written to it into lines
// and prints them to stream: a command's stdout or stderr. Close prints a
// last line without a newline. It is not safe for concurrent use (an
// exec.Cmd writes each stream from one goroutine).
func (c *Call) OutputWriter(stream string) io.WriteCloser {
	return &lineWriter{c: c, stream: stream}
}

type lineWriter struct {
	c      *Call
	stream string
	buf    []byte // an unfinished line
}

func (w *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	if w.c == nil || w.c.Output == nil {
		return n, nil
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.buf = append(w.buf, p...)
			for len(w.buf) >= MaxLineBytes {
				w.emit(w.buf[:MaxLineBytes])
				w.buf = append(w.buf[:0], w.buf[MaxLineBytes:]...)
			}
			break
		}
		line := p[:i]
		if len(w.buf) > 0 {
			w.buf = append(w.buf, line...)
			line = w.buf
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		for len(line) > MaxLineBytes {
			w.emit(line[:MaxLineBytes])
			line = line[MaxLineBytes:]
		}
		w.emit(line)
		w.buf = w.buf[:0]
		p = p[i+1:]
	}
	return n, nil
}

func (w *lineWriter) emit(b []byte) { w.c.Output.Line(w.stream, string(b)) }

// Close prints the unfinished last line, if any.
func (w *lineWriter) Close() error {
	if len(w.buf) > 0 && w.c != nil && w.c.Output != nil {
		w.emit(bytes.TrimSuffix(w.buf, []byte("\r")))
	}
	w.buf = nil
	return nil
}

// WatchCalls returns ctx under which every attempt of a cloud API call
// (internal/cloud/httpcall) is printed to c's output as a StreamCall line:
// method, path, status, duration; never headers, bodies or queries. The
// engine runs each step under it.
func WatchCalls(ctx context.Context, c *Call) context.Context {
	if c == nil || c.Output == nil {
		return ctx
	}
	return httpcall.Watch(ctx, func(a httpcall.Attempt) { c.Print(StreamCall, a.String()) })
}
