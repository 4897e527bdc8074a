package steps_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/runbook/runbook/internal/steps"
)

type sink struct {
	mu    sync.Mutex
	lines []string
}

func (s *sink) Line(stream, text string) {
	s.mu.Lock()
	s.lines = append(s.lines, stream+":"+text)
	s.mu.Unlock()
}

func TestOutputWriterCutsLines(t *testing.T) {
	long := strings.Repeat("x", steps.MaxLineBytes+10)
	cases := []struct {
		name   string
		writes []string
		want   []string
	}{
		{"whole lines in one write", []string{"a\nb\n"}, []string{"out:a", "out:b"}},
		{"a line split across writes", []string{"he", "llo\nwor", "ld\n"}, []string{"out:hello", "out:world"}},
		{"a last line without newline is printed at close", []string{"a\nlast"}, []string{"out:a", "out:last"}},
		{"carriage returns before newlines are dropped", []string{"dos\r\n"}, []string{"out:dos"}},
		{"empty lines are kept", []string{"\n\n"}, []string{"out:", "out:"}},
		{"a line longer than the limit is cut", []string{long + "\n"}, []string{"out:" + long[:steps.MaxLineBytes], "out:xxxxxxxxxx"}},
		{"an unfinished long line is cut as it grows", []string{long[:steps.MaxLineBytes-1], "yy"}, []string{"out:" + long[:steps.MaxLineBytes-1] + "y", "out:y"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &sink{}
			call := &steps.Call{Output: s}
			w := call.OutputWriter("out")
			for _, wr := range c.writes {
				n, err := w.Write([]byte(wr))
				if err != nil || n != len(wr) {
					t.Fatalf("write: %d, %v", n, err)
				}
			}
			w.Close()
			if strings.Join(s.lines, "|") != strings.Join(c.want, "|") {
				t.Fatalf("got %q\nwant %q", s.lines, c.want)
			}
		})
	}
	t.Run("a call without a sink drops output", func(t *testing.T) {
		call := &steps.Call{}
		w := call.OutputWriter("out")
		if _, err := w.Write([]byte("x\n")); err != nil {
			t.Fatal(err)
		}
		call.Print("out", "y")
		w.Close()
	})
}
