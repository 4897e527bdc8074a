package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// section returns the lines of help text under title ("Commands:" or
// "Flags:") up to the next unindented line.
func section(help, title string) []string {
	var out []string
	in := false
	for line := range strings.SplitSeq(help, "\n") {
		switch {
		case line == title:
			in = true
		case in && line != "" && !strings.HasPrefix(line, " "):
			in = false
		case in && line != "":
			out = append(out, line)
		}
	}
	return out
}

// TestEveryHelpWritesFlagsAsTheDocsDo: every command's -h lists its long
// flags with two dashes and one-letter ones with one, each followed by a
// one-word argument name at most (the word the usage backticks), so that
// what the help shows can be typed as shown.
func TestEveryHelpWritesFlagsAsTheDocsDo(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	flagLine := regexp.MustCompile(`^  (--[a-z0-9][a-z0-9-]+|-[a-z])( [A-Z][A-Z0-9_=.]*)?$`)
	command := regexp.MustCompile(`^  ([a-z][a-z0-9-]*)  `)
	top := c.run("help")
	require.Equal(t, 0, top.code, top)
	var cmds [][]string
	for _, line := range section(top.stdout, "Commands:") {
		m := command.FindStringSubmatch(line)
		require.NotNil(t, m, line)
		cmds = append(cmds, []string{m[1]})
		h := c.run(m[1], "-h")
		for _, sub := range section(h.stdout, "Commands:") {
			if s := command.FindStringSubmatch(sub); s != nil {
				cmds = append(cmds, []string{m[1], s[1]})
			}
		}
	}
	require.Greater(t, len(cmds), 25, "the verbs and their sub-verbs")
	flags := 0
	for _, cmd := range cmds {
		h := c.run(append(cmd, "-h")...)
		for _, line := range section(h.stdout, "Flags:") {
			if strings.HasPrefix(line, "    ") {
				continue // the flag's description
			}
			flags++
			assert.Regexp(t, flagLine, line, "runbook %s -h", strings.Join(cmd, " "))
		}
	}
	assert.Greater(t, flags, 100)
	h := c.run("run", "-h")
	assert.Contains(t, h.stdout, "\n  --sim-url URL\n")
	assert.Contains(t, h.stdout, "\n  -i KEY=VALUE\n")
	assert.Contains(t, h.stdout, "\n  --state FILE\n")
}
