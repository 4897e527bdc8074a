package yamlnode

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	yaml "go.yaml.in/yaml/v4"
)

// collect returns an Errorf that records "line:col: path: message".
func collect(out *[]string) Errorf {
	return func(n *yaml.Node, path, format string, args ...any) {
		line, col := 1, 1
		if n != nil {
			line, col = n.Line, n.Column
		}
		*out = append(*out, fmt.Sprintf("%d:%d: %s: %s", line, col, path, fmt.Sprintf(format, args...)))
	}
}

func root(t *testing.T, src string) *yaml.Node {
	t.Helper()
	var doc yaml.Node
	require.NoError(t, yaml.Load([]byte(src), &doc))
	return doc.Content[0]
}

func names(o *Object) []string {
	var out []string
	for _, p := range o.Pairs {
		out = append(out, p.Name)
	}
	return out
}

func TestMappingMergesWithExplicitKeysWinning(t *testing.T) {
	var diags []string
	o := Mapping(collect(&diags), root(t, `
base: &b {a: 1, b: 2}
more: &m {b: 3, c: 4}
top:
  <<: [*b, *m]
  a: 0
`), "")
	require.NotNil(t, o)
	top := Mapping(collect(&diags), o.Get("top"), "top")
	require.NotNil(t, top)
	assert.Empty(t, diags)
	assert.Equal(t, []string{"a", "b", "c"}, names(top), "explicit keys first, then merged ones in source order")
	assert.Equal(t, "0", top.Get("a").Value, "an explicit key wins over a merged one")
	assert.Equal(t, "2", top.Get("b").Value, "an earlier merge source wins over a later one")
}

func TestMappingReportsWhereTheProblemIs(t *testing.T) {
	tests := []struct {
		name, src, path string
		want            []string
	}{
		{"a duplicate key is reported at its second occurrence", "a: 1\nb: 2\na: 3\n", "",
			[]string{`3:1: a: duplicate key "a" (first at line 1)`}},
		{"a list is not a mapping", "- 1\n", "x",
			[]string{`1:1: x: must be a mapping (got a list)`}},
		{"a merge of a scalar is refused", "<<: 1\n", "x",
			[]string{`1:5: x: << must merge a mapping or a list of mappings (got integer)`}},
		{"a key that is not a scalar is refused", "? [1]\n: 2\n", "x",
			[]string{`1:3: x: mapping keys must be strings (got a list)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var diags []string
			Mapping(collect(&diags), root(t, tt.src), tt.path)
			assert.Equal(t, tt.want, diags)
		})
	}
}

func TestStrictNamesUnknownKeysWithAHint(t *testing.T) {
	var diags []string
	o := Strict(collect(&diags), root(t, "x-anchors: 1\nstep: 2\n\"a b\": 3\n"), "", "steps", "name")
	require.NotNil(t, o)
	assert.Equal(t, []string{
		`2:1: step: unknown key "step"; did you mean "steps"?`,
		`3:1: ["a b"]: unknown key "a b"`,
	}, diags, "top-level x- keys are allowed; other names are quoted when not plain")

	diags = nil
	Strict(collect(&diags), root(t, "x-anchors: 1\n"), "server", "listen")
	assert.Equal(t, []string{`1:1: server.x-anchors: unknown key "x-anchors"`}, diags, "x- keys are allowed at the top level only")
}

func TestKindWordNamesWhatANodeHolds(t *testing.T) {
	o := Mapping(collect(new([]string)), root(t, "s: a\ni: 1\nf: 1.5\nb: true\nn: null\nt: 2024-01-01\nl: []\nm: {}\nal: &x 1\nref: *x\n"), "")
	want := map[string]string{"s": "string", "i": "integer", "f": "number", "b": "boolean", "n": "null",
		"t": "timestamp", "l": "a list", "m": "a mapping", "ref": "integer"}
	for key, word := range want {
		assert.Equal(t, word, KindWord(o.Pairs[indexOf(o, key)].Val), key)
	}
	assert.Equal(t, "nothing", KindWord(nil))
}

func indexOf(o *Object, key string) int {
	for i, p := range o.Pairs {
		if p.Name == key {
			return i
		}
	}
	return -1
}

func TestPathsQuoteKeysThatAreNotPlainNames(t *testing.T) {
	assert.Equal(t, "steps", KeyPath("", "steps"))
	assert.Equal(t, "steps[2].with.node_count", KeyPath(JoinPath(IndexPath("steps", 2), "with"), "node_count"))
	assert.Equal(t, `routes["a.b"]`, KeyPath("routes", "a.b"))
	assert.Equal(t, `[""]`, KeyPath("", ""))
}

func TestParseDuration(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		err  string
	}{
		{in: "30s", want: 30 * time.Second},
		{in: "1h30m", want: 90 * time.Minute},
		{in: "2d", want: 48 * time.Hour},
		{in: "1d12h", want: 36 * time.Hour},
		{in: "0s", want: 0},
		{in: "5 minutes", err: `invalid duration "5 minutes"; use e.g. 30s, 5m, 2h, 1d`},
		{in: "-1s", err: `invalid duration "-1s": must not be negative`},
		{in: "d", err: `invalid duration "d"; use e.g. 30s, 5m, 2h, 1d`},
		{in: "1.5d", err: `invalid duration "1.5d"; use e.g. 30s, 5m, 2h, 1d`},
		{in: "99999999d", err: `invalid duration "99999999d"; use e.g. 30s, 5m, 2h, 1d`},
		{in: "", err: `invalid duration ""; use e.g. 30s, 5m, 2h, 1d`},
	} {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParseDuration(c.in)
			if c.err != "" {
				require.Error(t, err)
				assert.Equal(t, c.err, err.Error())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
}
