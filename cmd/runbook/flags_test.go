package main

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseArgsAcceptsFlagsAnywhere(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		pos     []string
		inputs  []string
		verbose bool
	}{
		{"flags before the file", []string{"-v", "-i", "a=1", "f.yaml"}, []string{"f.yaml"}, []string{"a=1"}, true},
		{"flags after the file", []string{"f.yaml", "-i", "a=1", "--v"}, []string{"f.yaml"}, []string{"a=1"}, true},
		{"flags between files", []string{"a.yaml", "-i", "x=2", "b.yaml"}, []string{"a.yaml", "b.yaml"}, []string{"x=2"}, false},
		{"-- ends the flags", []string{"a.yaml", "--", "-v", "-i"}, []string{"a.yaml", "-v", "-i"}, nil, false},
		{"a value may contain =", []string{"-i", "q=a=b", "f"}, []string{"f"}, []string{"q=a=b"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &app{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
			fs := newFlagSet(a, command{name: "test"})
			var in kvList
			fs.Var(&in, "i", "")
			v := fs.Bool("v", false, "")
			pos, err := parseArgs(fs, tt.args)
			require.NoError(t, err)
			assert.Equal(t, tt.pos, pos)
			var got []string
			for i, k := range in.keys {
				got = append(got, k+"="+in.vals[i])
			}
			assert.Equal(t, tt.inputs, got)
			assert.Equal(t, tt.verbose, *v)
		})
	}
}

func TestParseArgsErrors(t *testing.T) {
	a := &app{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
	fs := newFlagSet(a, command{name: "test", usage: "FILE", summary: "Test things."})
	var in kvList
	fs.Var(&in, "i", "")

	_, err := parseArgs(fs, []string{"f", "-i", "novalue"})
	var ee *exitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 2, ee.code)
	assert.Contains(t, err.Error(), `want key=value, got "novalue"`)
	assert.Equal(t, "runbook test -h", ee.hint)

	_, err = parseArgs(fs, []string{"f", "-h"})
	assert.True(t, errors.Is(err, errHelpShown))
	assert.Contains(t, a.stdout.(*bytes.Buffer).String(), "Usage: runbook test FILE\n\nTest things.\n")
}

func TestJSONValue(t *testing.T) {
	tests := []struct {
		in   string
		want any
	}{
		{"3", float64(3)},
		{"true", true},
		{"[1,2]", []any{float64(1), float64(2)}},
		{`{"a":"b"}`, map[string]any{"a": "b"}},
		{`"quoted"`, "quoted"},
		{"plain text", "plain text"},
		{"", ""},
		{"{not json", "{not json"},
	}
	for _, tt := range tests {
		got, err := jsonValue(tt.in)
		require.NoError(t, err)
		assert.Equal(t, tt.want, got, tt.in)
	}
}
