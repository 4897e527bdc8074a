package playtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testDir returns a directory holding testdata/hello.yaml, and writes
// the test file src there as t.test.yaml, returning its path.
func testDir(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	pb, err := os.ReadFile("testdata/hello.yaml")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "hello.yaml"), pb, 0o600))
	p := filepath.Join(dir, "t.test.yaml")
	require.NoError(t, os.WriteFile(p, []byte(src), 0o600))
	return p
}

func TestTheExampleTestFileLoads(t *testing.T) {
	f, err := Load("testdata/hello.test.yaml")
	require.NoError(t, err)
	require.Len(t, f.Cases, 3)
	assert.Equal(t, "hello", f.Playbook.Name)
	assert.Equal(t, "greets the world", f.Cases[0].Name)
	assert.Equal(t, Pos{File: "testdata/hello.test.yaml", Line: 4, Col: 5}, f.Cases[0].Pos)
	assert.Equal(t, float64(DefaultSpeed), f.Cases[0].Speed)
}

// An invalid test file is reported like an invalid playbook: every
// problem at once, each at file:line:col with its path.
func TestInvalidTestFilesSayWhereAndWhat(t *testing.T) {
	head := "version: 1\nplaybook: hello.yaml\ncases:\n"
	for _, tc := range []struct {
		name string
		src  string
		want []string // diagnostics without the file name
	}{
		{"an unknown case key with a hint", head + "  - name: a\n    inptus: {}\n    expect: {status: succeeded}\n",
			[]string{`5:5: cases[0].inptus: unknown key "inptus"; did you mean "inputs"?`}},
		{"a step the playbook does not have", head + "  - name: a\n    expect:\n      steps:\n        gret: succeeded\n",
			[]string{`7:9: cases[0].expect.steps.gret: playbook hello has no step "gret"; did you mean "greet"?`}},
		{"an input the playbook does not have", head + "  - name: a\n    inputs: {whom: x}\n    expect: {status: succeeded}\n",
			[]string{`5:14: cases[0].inputs.whom: playbook hello has no input "whom"; did you mean "who"?`}},
		{"a bad status", head + "  - name: a\n    expect: {status: done}\n",
			[]string{`5:22: cases[0].expect.status: must be one of succeeded, failed, cancelled, waiting, skipped, refused (got "done")`}},
		{"a case without expectations", head + "  - name: a\n",
			[]string{`4:5: cases[0]: expect is required: a case without expectations cannot fail`}},
		{"a broken expression", head + "  - name: a\n    expect:\n      outputs: {greeting: '${{ result.greeting == }}'}\n",
			[]string{`6:50: cases[0].expect.outputs.greeting: unexpected token EOF`}},
		{"two problems at once", head + "  - name: a\n    clock: {speed: 0}\n    expect: {runs: many}\n  - name: a\n    expect: {runs: 1}\n",
			[]string{`5:20: cases[0].clock.speed: must be more than 0 (got 0)`, `6:20: cases[0].expect.runs: must be an integer (got string)`,
				`7:5: cases[1].name: duplicate case name "a" (first at line 4)`}},
		{"a kill after a step that does not exist", head + "  - name: a\n    faults: [{kill: {after: nope}}]\n    expect: {status: succeeded}\n",
			[]string{`5:29: cases[0].faults[0].kill.after: playbook hello has no step "nope"`}},
		{"a webhook for a playbook without one", head + "  - name: a\n    trigger: {webhook: {body: {}}}\n    expect: {status: succeeded}\n",
			[]string{`5:24: cases[0].trigger.webhook: playbook hello has no webhook trigger`}},
		{"a boolean, a duration and an indenting tab, in the playbook's words", head + "  - name: a\n    faults: [{http: {service: nks, status: 503, latency: soon}}]\n    expect: {status: succeeded, calls_ordered: sure}\n",
			[]string{`5:58: cases[0].faults[0].http.latency: invalid duration "soon"; use e.g. 30s, 5m, 2h, 1d`,
				`6:48: cases[0].expect.calls_ordered: must be a boolean (got string)`}},
		{"a tab that indents", head + "  - name: a\n\texpect: {status: succeeded}\n",
			[]string{`5:1: invalid YAML: while scanning a plain scalar: found a tab character that violates indentation (tabs cannot indent YAML; use spaces)`}},
		{"a missing playbook", "version: 1\nplaybook: nope.yaml\ncases:\n  - name: a\n    expect: {status: succeeded}\n",
			[]string{`2:11: playbook: no playbook nope.yaml (paths are relative to the test file)`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testDir(t, tc.src)
			_, err := Load(p)
			require.Error(t, err)
			var got []string
			for _, line := range strings.Split(err.Error(), "\n") {
				got = append(got, strings.TrimPrefix(line, p+":"))
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// A playbook that does not load is reported with its own diagnostics.
func TestAPlaybookThatDoesNotLoadIsReportedWithItsProblems(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("version: 1\nname: bad\nsteps:\n  - id: a\n    uses: nope\n"), 0o600))
	p := filepath.Join(dir, "bad.test.yaml")
	require.NoError(t, os.WriteFile(p, []byte("version: 1\nplaybook: bad.yaml\ncases:\n  - name: a\n    expect: {status: succeeded}\n"), 0o600))
	_, err := Load(p)
	require.Error(t, err)
	lines := strings.Split(err.Error(), "\n")
	require.Len(t, lines, 2, err.Error())
	assert.Equal(t, p+":2:11: playbook: bad.yaml does not load (1 problems below)", lines[0])
	assert.Contains(t, lines[1], filepath.Join(dir, "bad.yaml")+":5:11: steps[0].uses: unknown step type")
}

func TestDiscoverFindsTestFilesAndSkipsHiddenAndTestdata(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"a.test.yaml", "sub/b.test.yaml", "sub/c.yaml", ".hidden/d.test.yaml", "testdata/e.test.yaml"} {
		full := filepath.Join(dir, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o700))
		require.NoError(t, os.WriteFile(full, nil, 0o600))
	}
	got, err := Discover([]string{dir, filepath.Join(dir, "a.test.yaml")})
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(dir, "a.test.yaml"), filepath.Join(dir, "sub/b.test.yaml")}, got)
	_, err = Discover([]string{filepath.Join(dir, "missing")})
	assert.Error(t, err)
}
