package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
	"text/tabwriter"
)

// command describes one verb (or `runs` sub-verb) for its flag set and usage.
type command struct {
	name    string // "run", "runs approve"
	usage   string // arguments after the name
	summary string
	details string // optional paragraph after the summary
}

// newFlagSet returns a flag set whose -h prints the command's usage to
// stdout. Parse errors are returned, never printed by the flag package.
func newFlagSet(a *app, c command) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		w := a.stdout
		fmt.Fprintf(w, "Usage: runbook %s %s\n\n%s\n", c.name, c.usage, c.summary)
		if c.details != "" {
			fmt.Fprintf(w, "\n%s\n", strings.TrimRight(c.details, "\n"))
		}
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintln(w, "\nFlags:")
			printFlags(w, fs)
		}
	}
	return fs
}

// printFlags lists fs's flags as the docs write them: a long name with
// two dashes (--state FILE), a one-letter one with one (-i KEY=VALUE), the
// argument named by the first `word` of the usage, upper-cased.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		dash := "--"
		if len(f.Name) == 1 {
			dash = "-"
		}
		line := "  " + dash + f.Name
		if arg != "" {
			line += " " + strings.ToUpper(arg)
		}
		if def := f.DefValue; def != "" && def != zeroValue(f) {
			if strings.HasSuffix(fmt.Sprintf("%T", f.Value), ".stringValue") {
				def = strconv.Quote(def)
			}
			usage += " (default " + def + ")"
		}
		fmt.Fprintf(w, "%s\n    \t%s\n", line, strings.ReplaceAll(usage, "\n", "\n    \t"))
	})
}

// zeroValue is the text of f's type's zero value, which the help leaves
// unsaid as flag.PrintDefaults does.
func zeroValue(f *flag.Flag) string {
	t := reflect.TypeOf(f.Value)
	var z reflect.Value
	if t.Kind() == reflect.Pointer {
		z = reflect.New(t.Elem())
	} else {
		z = reflect.Zero(t)
	}
	v, ok := z.Interface().(flag.Value)
	if !ok {
		return ""
	}
	defer func() { _ = recover() }() // a String that needs its fields set
	return v.String()
}

// parseArgs parses flags placed before, between and after positional
// arguments ("--" ends the flags) and returns the positional ones. -h
// prints the usage and returns errHelpShown; a bad flag is a usage error.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, errHelpShown // Parse printed the usage
			}
			return nil, &exitError{code: 2, err: err, hint: "runbook " + fs.Name() + " -h"}
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// parsePositional parses args as parseArgs does and checks that lo to hi
// positional arguments are given (wantArgs).
func parsePositional(fs *flag.FlagSet, args []string, lo, hi int, what string) ([]string, error) {
	pos, err := parseArgs(fs, args)
	if err != nil {
		return nil, err
	}
	return pos, wantArgs(fs, pos, lo, hi, what)
}

// wantArgs checks the number of positional arguments.
func wantArgs(fs *flag.FlagSet, pos []string, lo, hi int, what string) error {
	switch {
	case len(pos) < lo:
		return &exitError{code: 2, err: fmt.Errorf("missing %s", what), hint: "runbook " + fs.Name() + " -h"}
	case hi >= 0 && len(pos) > hi:
		return &exitError{code: 2, err: fmt.Errorf("unexpected argument %q", pos[hi]), hint: "runbook " + fs.Name() + " -h"}
	}
	return nil
}

// kvList is a repeatable k=v flag.
type kvList struct {
	keys []string
	vals []string
}

func (l *kvList) String() string { return "" }

func (l *kvList) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("want key=value, got %q", s)
	}
	l.keys = append(l.keys, strings.TrimSpace(k))
	l.vals = append(l.vals, v)
	return nil
}

// strings returns the pairs as a map of strings (the last one wins).
func (l *kvList) strings() map[string]any {
	if len(l.keys) == 0 {
		return nil
	}
	m := make(map[string]any, len(l.keys))
	for i, k := range l.keys {
		m[k] = l.vals[i]
	}
	return m
}

// outputFlag is --output text|json.
type outputFlag struct{ json bool }

func (o *outputFlag) String() string {
	if o.json {
		return "json"
	}
	return "text"
}

func (o *outputFlag) Set(s string) error {
	switch s {
	case "text", "":
		o.json = false
	case "json":
		o.json = true
	default:
		return fmt.Errorf("want text or json, got %q", s)
	}
	return nil
}

func addOutputFlag(fs *flag.FlagSet, def string) *outputFlag {
	o := &outputFlag{json: def == "json"}
	usage := "output `format`: text or json"
	if def == "text" {
		usage += " (default text)" // the flag package shows non-zero defaults only
	}
	fs.Var(o, "output", usage)
	return o
}

// jsonValue parses a command-line value: JSON when it parses as JSON
// (numbers, true, null, [..], {..}, "quoted"), otherwise the string itself.
// "@file" reads the value from a file, with the same rule.
func jsonValue(s string) (any, error) {
	if strings.HasPrefix(s, "@") && len(s) > 1 {
		b, err := os.ReadFile(s[1:])
		if err != nil {
			return nil, err
		}
		s = string(b)
	}
	t := strings.TrimSpace(s)
	if t == "" {
		return s, nil
	}
	var v any
	if err := json.Unmarshal([]byte(t), &v); err == nil {
		return v, nil
	}
	return s, nil
}

// writeJSON writes v as indented JSON with a final newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// table aligns tab-separated cells in columns, without trailing blanks.
type table struct {
	w   io.Writer
	buf strings.Builder
	tw  *tabwriter.Writer
}

func newTable(w io.Writer, pad int) *table {
	t := &table{w: w}
	t.tw = tabwriter.NewWriter(&t.buf, 0, 0, pad, ' ', 0)
	return t
}

func (t *table) row(cells ...string) { fmt.Fprintln(t.tw, strings.Join(cells, "\t")) }

func (t *table) flush() error {
	if err := t.tw.Flush(); err != nil {
		return err
	}
	var b strings.Builder
	for _, line := range strings.SplitAfter(t.buf.String(), "\n") {
		if line == "" {
			continue
		}
		b.WriteString(strings.TrimRight(line, " \n"))
		b.WriteByte('\n')
	}
	_, err := io.WriteString(t.w, b.String())
	return err
}
