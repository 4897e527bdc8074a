package steps

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/fault"
)

// RecordedOutputBytes bounds the stdout and stderr outputs of a command
// step (shell, ssh). They are kept in the step's record (runs show, a
// resume, later expressions), which a chatty command must not inflate:
// beyond this (the default of max_output_bytes) they are cut and
// truncated is true. Every line is in the step's output log (runs logs
// RUN STEP) whatever the cut, and parse_json reads all max_output_bytes.
const RecordedOutputBytes = 1 << 20

// CommandOutputs documents the outputs Result sets, for a command step's
// Def.Outputs.
var CommandOutputs = []Output{
	{Name: "exit_code", Type: "integer", Description: "exit code (-1 when killed by a signal)"},
	{Name: "stdout", Type: "string", Description: "standard output (its first mebibyte), one trailing newline removed"},
	{Name: "stderr", Type: "string", Description: "standard error (its first mebibyte), one trailing newline removed"},
	{Name: "json", Type: "any", Description: "stdout parsed as JSON when parse_json is set, else null"},
	{Name: "truncated", Type: "boolean", Description: "whether either stream exceeded max_output_bytes, or stdout or stderr was cut to its first mebibyte"},
	{Name: "duration_ms", Type: "integer", Description: "time the command ran"},
}

// CommandOutput is where the two streams of a command a step runs go:
// what max_output_bytes keeps of each for the step's outputs, and every
// line to the run's step output (runbook run's progress, runs logs, the
// API's stream), as it is printed. The engine masks secrets in those
// lines. Give Stdout and Stderr to the command; Close once it ended.
type CommandOutput struct {
	Stdout, Stderr *CommandStream
}

// NewCommandOutput returns the streams of a command of c that keep max
// bytes each.
func NewCommandOutput(c *Call, max int) *CommandOutput {
	return &CommandOutput{
		Stdout: &CommandStream{kept: capped{max: max}, lines: c.OutputWriter(StreamStdout)},
		Stderr: &CommandStream{kept: capped{max: max}, lines: c.OutputWriter(StreamStderr)},
	}
}

// Close prints the last line of each stream that had no newline.
func (o *CommandOutput) Close() {
	o.Stdout.lines.Close()
	o.Stderr.lines.Close()
}

// StderrTail is the last n bytes of what stderr kept, for an error's data.
func (o *CommandOutput) StderrTail(n int) string { return tail(o.Stderr.kept.buf, n) }

// CommandEnd is how a command ended, for Result.
type CommandEnd struct {
	Code      int           // exit code (-1 when killed by a signal)
	Signal    string        // the signal that killed it, "" if none ("killed" for a SIGKILL)
	Elapsed   time.Duration // time it ran
	Allowed   []int         // exit codes that count as success (empty: 0)
	ParseJSON bool          // parse stdout as JSON into the json output
	MaxBytes  int           // max_output_bytes, for parse_json's message
}

// Result is a command step's outputs (CommandOutputs) and its error: a
// Failed error when the exit code is not allowed (naming the code or the
// signal and the last line of stderr), or when parse_json is asked and
// stdout is not JSON or was cut.
func (o *CommandOutput) Result(e CommandEnd) (Outputs, error) {
	stdout, stderr := &o.Stdout.kept, &o.Stderr.kept
	out := Outputs{
		"exit_code":   e.Code,
		"stdout":      trimNewline(head(stdout.buf, RecordedOutputBytes)),
		"stderr":      trimNewline(head(stderr.buf, RecordedOutputBytes)),
		"json":        nil,
		"truncated":   stdout.dropped > 0 || stderr.dropped > 0 || len(stdout.buf) > RecordedOutputBytes || len(stderr.buf) > RecordedOutputBytes,
		"duration_ms": e.Elapsed.Milliseconds(),
	}
	if !exitAllowed(e.Code, e.Allowed) {
		msg := fmt.Sprintf("command exited with code %d", e.Code)
		if e.Signal != "" {
			msg = "command was killed by " + e.Signal
		}
		if t := strings.TrimSpace(tail(stderr.buf, 200)); t != "" {
			msg += ": " + lastLine(t)
		}
		return out, &fault.Error{Code: fault.Failed, Message: msg,
			Data: map[string]any{"exit_code": e.Code, "stderr": tail(stderr.buf, 1024)}}
	}
	if e.ParseJSON {
		if stdout.dropped > 0 {
			return out, &fault.Error{Code: fault.Failed, Message: fmt.Sprintf("stdout is longer than max_output_bytes (%d) and cannot be parsed as JSON", e.MaxBytes)}
		}
		var v any
		if err := json.Unmarshal(stdout.buf, &v); err != nil {
			return out, &fault.Error{Code: fault.Failed, Message: "stdout is not JSON", Err: err,
				Data: map[string]any{"stdout": tail(stdout.buf, 1024)}}
		}
		out["json"] = v
	}
	return out, nil
}

// CommandStream is one stream of a command: what max_output_bytes keeps,
// and every line to the step's output.
type CommandStream struct {
	kept  capped
	lines io.WriteCloser
}

func (s *CommandStream) Write(p []byte) (int, error) {
	s.kept.Write(p)
	return s.lines.Write(p)
}

// copyBuffers are the buffers streams read a command's pipes through. An
// exec.Cmd (or an ssh session) copies each pipe with io.Copy, which
// allocates 32 KiB a stream when its writer cannot read for itself: 64 KiB
// a step, most of a shell step's allocations.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// CopyBuffer lends a buffer of copyBuffers for reading a command's pipes;
// give it back with release once done.
func CopyBuffer() (buf []byte, release func()) {
	b := copyBuffers.Get().(*[]byte)
	return *b, func() { copyBuffers.Put(b) }
}

// ReadFrom copies r to s through a pooled buffer; the command's copy of a
// pipe lands here. The wrappers hide r's WriteTo and s's ReadFrom, either
// of which io.CopyBuffer would call instead of using the buffer.
func (s *CommandStream) ReadFrom(r io.Reader) (int64, error) {
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	return io.CopyBuffer(struct{ io.Writer }{s}, struct{ io.Reader }{r}, *buf)
}

// capped keeps the first max bytes written and counts the rest.
type capped struct {
	buf     []byte
	max     int
	dropped int64
}

func (w *capped) Write(p []byte) (int, error) {
	room := w.max - len(w.buf)
	if room >= len(p) {
		w.buf = append(w.buf, p...)
	} else {
		if room > 0 {
			w.buf = append(w.buf, p[:room]...)
		}
		w.dropped += int64(len(p) - max(room, 0))
	}
	return len(p), nil
}

func exitAllowed(code int, allowed []int) bool {
	if len(allowed) == 0 {
		return code == 0
	}
	for _, a := range allowed {
		if a == code {
			return true
		}
	}
	return false
}

func trimNewline(b []byte) string {
	b = bytes.TrimSuffix(b, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	return string(b)
}

// head returns the first n bytes of b.
func head(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// tail returns the last n bytes of b as a string.
func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
