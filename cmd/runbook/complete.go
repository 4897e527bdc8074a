package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/steps"
)

// filesDirective is the first line of a completion answer that asks the
// shell for its own file-name completion.
const filesDirective = ":files"

// completeRunIDs is how many run IDs, newest first, a completion offers.
const completeRunIDs = 100

// complete answers `runbook completion __complete WORD... CURRENT`: the
// candidates for CURRENT, one a line, given the words before it (verb,
// sub-command, flags, arguments). The shell filters them by prefix. The
// verbs' flags and sub-commands are read from their own -h, so there is
// one list of each.
func complete(ctx context.Context, words []string) []string {
	if len(words) == 0 {
		return nil
	}
	cur, prev := words[len(words)-1], words[:len(words)-1]
	if len(prev) == 0 {
		return append(verbNames(), "help")
	}
	v := findVerb(prev[0])
	if prev[0] == "help" {
		if len(prev) == 1 {
			return verbNames()
		}
		return nil
	}
	if v == nil {
		return nil
	}
	path := []string{v.name}
	subs := helpSection(ctx, v, nil, "Commands:")
	args := prev[1:]
	if len(subs) > 0 {
		if len(args) == 0 {
			return subs
		}
		path = append(path, args[0])
		args = args[1:]
	}
	if strings.HasPrefix(cur, "-") {
		var flags []string
		for _, f := range helpSection(ctx, v, path[1:], "Flags:") {
			if len(f) == 1 {
				flags = append(flags, "-"+f) // -i, -v
			} else {
				flags = append(flags, "--"+f)
			}
		}
		return flags
	}
	if len(args) > 0 && strings.HasPrefix(args[len(args)-1], "-") && !strings.Contains(args[len(args)-1], "=") {
		if vals, ok := flagValues(ctx, strings.TrimLeft(args[len(args)-1], "-"), prev); ok {
			return vals
		}
	}
	return positional(ctx, strings.Join(path, " "), positionals(args), prev)
}

// flagValues are the candidates for the value of flag; ok is false for a
// flag that takes none (a bool: the word is a positional argument).
func flagValues(ctx context.Context, flag string, words []string) ([]string, bool) {
	switch flag {
	case "status":
		return state.RunStatusNames(), true
	case "output":
		return []string{"text", "json"}, true
	case "format":
		return []string{"github"}, true
	case "resume":
		return runIDs(ctx, words, true), true
	case "state", "secrets", "config", "inputs", "out", "dir", "file":
		return []string{filesDirective}, true
	case "i", "field", "with", "from", "older-than", "by", "comment", "server", "sim-url", "addr",
		"listen", "playbook", "limit", "speed", "seed", "services", "sim-speed", "timeout":
		return nil, true
	}
	return nil, false
}

// positionals drops the flags (and the values of flags that take one)
// from args, approximately: a flag followed by a word that is not a flag
// is taken to take it, unless it is a known bool.
func positionals(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i+1:]...)
		}
		if !strings.HasPrefix(a, "-") {
			out = append(out, a)
			continue
		}
		if _, takes := flagValues(context.Background(), strings.TrimLeft(a, "-"), nil); takes && !strings.Contains(a, "=") {
			i++
		}
	}
	return out
}

// positional returns the candidates for the next positional argument of
// command (its verb and sub-command) that already has args.
func positional(ctx context.Context, command string, args, words []string) []string {
	switch command {
	case "run", "validate", "plan", "test", "schedule":
		return []string{filesDirective}
	case "call", "steps", "schema":
		if len(args) == 0 {
			return steps.Names()
		}
	case "runs show", "runs logs", "runs cancel", "runs retry":
		if len(args) == 0 {
			return runIDs(ctx, words, command == "runs cancel")
		}
	case "runs approve":
		if len(args) == 0 {
			return runIDs(ctx, words, true)
		}
	case "completion":
		if len(args) == 0 {
			return []string{"bash", "zsh", "fish"}
		}
	}
	return nil
}

// runIDs lists the IDs of the runs in the state the words name (--state,
// else $RUNBOOK_STATE, else the default file), newest first; only
// unfinished ones with unfinished. A state that is missing or held by
// another process gives none: completion never waits or creates a file.
func runIDs(ctx context.Context, words []string, unfinished bool) []string {
	sf := &stateFlags{}
	for i, w := range words {
		if (w == "--state" || w == "-state") && i+1 < len(words) {
			sf.state = words[i+1]
		} else if v, ok := strings.CutPrefix(w, "--state="); ok {
			sf.state = v
		}
	}
	loc, err := sf.statePath()
	if err != nil {
		return nil
	}
	if !isDSN(loc) {
		if _, err := os.Stat(loc); err != nil {
			return nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	store, err := openLocation(loc, 100*time.Millisecond)
	if err != nil {
		return nil
	}
	defer store.Close()
	f := state.RunFilter{Limit: completeRunIDs}
	if unfinished {
		f.Status = []state.RunStatus{state.RunPending, state.RunRunning, state.RunWaiting, state.RunSuspended}
	}
	runs, err := store.ListRuns(ctx, f)
	if err != nil {
		return nil
	}
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	return ids
}

var (
	helpFlagRe    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^  --?([A-Za-z0-9][A-Za-z0-9-]*)`) })
	helpCommandRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^  ([a-z][a-z0-9-]*)\s`) })
)

// helpSection runs `runbook VERB [SUB] -h` in this process and returns the
// names its usage lists under title ("Flags:" or "Commands:").
func helpSection(ctx context.Context, v *verb, sub []string, title string) []string {
	var buf bytes.Buffer
	a := &app{stdout: &buf, stderr: io.Discard, redactor: nopRedactor{}, verb: v}
	err := v.run(ctx, a, append(slices.Clone(sub), "-h"))
	if err != nil && !errors.Is(err, errHelpShown) && buf.Len() == 0 {
		return nil
	}
	re := helpFlagRe()
	if title == "Commands:" {
		re = helpCommandRe()
	}
	var out []string
	in := false
	for line := range strings.SplitSeq(buf.String(), "\n") {
		switch {
		case line == title:
			in = true
		case in && line == "":
			// PrintDefaults separates nothing with blank lines; a command
			// list ends at one
			if title == "Commands:" {
				in = false
			}
		case in && !strings.HasPrefix(line, "  "):
			in = false
		case in:
			if m := re.FindStringSubmatch(line); m != nil && !slices.Contains(out, m[1]) {
				out = append(out, m[1])
			}
		}
	}
	return out
}
