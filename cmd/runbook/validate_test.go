package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValidate(t *testing.T) {
	c := newCLI(t)
	good := c.file("good.yaml", helloPlaybook)
	other := c.file("breaks.yaml", failingPlaybook)
	bad := c.file("bad.yaml", `version: 1
name: bad
steps:
  - id: a
    uses: log
    with: {message: hi}
  - id: b
    uses: lgo
  - id: c
    uses: sleep
    with: {duration: 1s, extra: true}
`)

	t.Run("valid files print ok with their step count", func(t *testing.T) {
		r := c.run("validate", good, other)
		assert.Equal(t, 0, r.code, r)
		assert.Equal(t, "ok  "+good+" (2 steps)\nok  "+other+" (3 steps)\n", r.stdout)
		assert.Empty(t, r.stderr)
	})
	t.Run("every diagnostic of an invalid file is printed with its position", func(t *testing.T) {
		r := c.run("validate", good, bad)
		assert.Equal(t, 2, r.code, r)
		assert.Equal(t, "ok  "+good+" (2 steps)\n", r.stdout)
		assert.Regexp(t, `(?m)^`+bad+`:8:\d+: .*lgo`, r.stderr)
		assert.Regexp(t, `(?m)^`+bad+`:11:\d+: .*extra`, r.stderr)
		assert.Contains(t, r.stderr, "1 file is invalid")
		assert.Contains(t, r.stderr, "Try: ")
	})
	t.Run("every problem of one string is reported at its own column", func(t *testing.T) {
		twice := c.file("twice.yaml", `version: 1
name: twice
steps:
  - {id: a, uses: log, with: {message: hi}}
  - {id: b, uses: log, with: {message: "${{ steps.a.outputs.nope }} ${{ inputs.x }}"}}
`)
		r := c.run("validate", twice)
		assert.Equal(t, 2, r.code, r)
		assert.Contains(t, r.stderr, twice+`:5:61: steps[1].with.message: step "a" has no output "nope"`)
		assert.Contains(t, r.stderr, twice+`:5:80: steps[1].with.message: unknown input "x"`)
	})
	t.Run("a missing file is an error", func(t *testing.T) {
		r := c.run("validate", "nope.yaml")
		assert.Equal(t, 2, r.code, r)
		assert.Contains(t, r.stderr, "nope.yaml")
	})
}

func TestValidateMachineOutput(t *testing.T) {
	c := newCLI(t)
	good := c.file("good.yaml", helloPlaybook)
	bad := c.file("bad.yaml", `version: 1
name: bad
steps:
  - id: a
    uses: lgo
  - id: b
    uses: log
    with: {message: hi, "50%": true}
`)

	t.Run("--output json prints every diagnostic with position, path, message and hint", func(t *testing.T) {
		r := c.run("validate", "--output", "json", good, bad)
		assert.Equal(t, 2, r.code, r)
		var doc struct {
			Valid bool `json:"valid"`
			Files []struct {
				File  string `json:"file"`
				Valid bool   `json:"valid"`
				Steps int    `json:"steps"`
			} `json:"files"`
			Diagnostics []struct {
				File    string `json:"file"`
				Line    int    `json:"line"`
				Column  int    `json:"column"`
				Path    string `json:"path"`
				Message string `json:"message"`
				Hint    string `json:"hint"`
			} `json:"diagnostics"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc), r.stdout)
		assert.False(t, doc.Valid)
		require.Len(t, doc.Files, 2)
		assert.Equal(t, good, doc.Files[0].File)
		assert.True(t, doc.Files[0].Valid)
		assert.Equal(t, 2, doc.Files[0].Steps)
		assert.False(t, doc.Files[1].Valid)
		require.Len(t, doc.Diagnostics, 2, r.stdout)
		d := doc.Diagnostics[0]
		assert.Equal(t, bad, d.File)
		assert.Equal(t, 5, d.Line)
		assert.Equal(t, 11, d.Column)
		assert.Equal(t, "steps[0].uses", d.Path)
		assert.Equal(t, `unknown step type "lgo"`, d.Message)
		assert.Equal(t, `did you mean "log"?`, d.Hint)
		assert.Equal(t, 8, doc.Diagnostics[1].Line)
		assert.Contains(t, doc.Diagnostics[1].Message, "50%")
		assert.Empty(t, doc.Diagnostics[1].Hint)
		assert.Contains(t, r.stderr, "1 file is invalid")
	})
	t.Run("--output json of valid files exits 0 with no diagnostics", func(t *testing.T) {
		r := c.run("validate", good, "--output", "json")
		assert.Equal(t, 0, r.code, r)
		assert.JSONEq(t, `{"valid":true,"files":[{"file":"`+good+`","valid":true,"steps":2}],"diagnostics":[]}`, r.stdout)
	})
	t.Run("--format github prints one escaped annotation per diagnostic", func(t *testing.T) {
		r := c.run("validate", "--format", "github", good, bad)
		assert.Equal(t, 2, r.code, r)
		lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
		require.Len(t, lines, 3, r.stdout)
		assert.Equal(t, "ok  "+good+" (2 steps)", lines[0])
		assert.Equal(t, `::error file=`+bad+`,line=5,col=11::steps[0].uses: unknown step type "lgo"; did you mean "log"?`, lines[1])
		assert.Regexp(t, `^::error file=`+regexp.QuoteMeta(bad)+`,line=8,col=\d+::.*50%25`, lines[2])
		assert.NotContains(t, lines[2], "50%\"")
	})
	t.Run("--output json and --format github together are a usage error", func(t *testing.T) {
		r := c.run("validate", "--format", "github", "--output", "json", good)
		assert.Equal(t, 2, r.code, r)
		assert.Contains(t, r.stderr, "cannot be combined")
	})
}

func TestGitHubAnnotationEscapes(t *testing.T) {
	got := githubAnnotation(validateDiag{File: "a,b:c.yaml", Line: 3, Column: 4, Path: "x", Message: "100%\r\nsure"})
	assert.Equal(t, "::error file=a%2Cb%3Ac.yaml,line=3,col=4::x: 100%25%0D%0Asure", got)
}
