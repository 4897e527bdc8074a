package steps_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecode(t *testing.T) {
	d := register(t, steps.Descriptor{Params: testParams{}})
	tests := []struct {
		name string
		with map[string]any
		want []string // problems, in order
	}{
		{"a minimal valid map decodes", map[string]any{"node_count": 3}, nil},
		{"a JSON integral float is accepted for an integer", map[string]any{"node_count": 3.0}, nil},
		{"a missing required field is reported", map[string]any{}, []string{"node_count: is required"}},
		{"a null counts as absent", map[string]any{"node_count": nil}, []string{"node_count: is required"}},
		{"a number above max is out of range", map[string]any{"node_count": 12},
			[]string{"node_count: must be between 1 and 10 (got 12)"}},
		{"a fractional number is not an integer", map[string]any{"node_count": 1.5},
			[]string{"node_count: must be an integer (got number 1.5)"}},
		{"a numeric string is not converted to an integer", map[string]any{"node_count": "3"},
			[]string{`node_count: must be an integer (got string "3")`}},
		{"a number for a string field is an error", map[string]any{"node_count": 1, "name": 3},
			[]string{"name: must be a string (got integer 3)"}},
		{"an enum violation lists the choices", map[string]any{"node_count": 1, "method": "FETCH"},
			[]string{`method: must be one of GET, POST (got "FETCH")`}},
		{"an enum in the wrong case suggests the right one", map[string]any{"node_count": 1, "method": "get"},
			[]string{`method: must be one of GET, POST (got "get"); did you mean "GET"?`}},
		{"a long string counts characters", map[string]any{"node_count": 1, "name": strings.Repeat("é", 61)},
			[]string{"name: must be at most 50 characters (got 61)"}},
		{"a pattern mismatch quotes the pattern", map[string]any{"node_count": 1, "version": "x"},
			[]string{`version: must match ^v\d+$ (got "x")`}},
		{"a bad duration explains the format", map[string]any{"node_count": 1, "timeout": "soon"},
			[]string{`timeout: must be a duration like 30s or 5m (got "soon")`}},
		{"a duration above max is out of range", map[string]any{"node_count": 1, "timeout": "800h"},
			[]string{"timeout: must be at most 720h (got 800h)"}},
		{"a negative duration is rejected", map[string]any{"node_count": 1, "timeout": "-1s"},
			[]string{`timeout: must not be negative (got "-1s")`}},
		{"a duration as integer seconds is accepted", map[string]any{"node_count": 1, "timeout": 90}, nil},
		{"an unknown key suggests the closest name", map[string]any{"node_count": 1, "nmae": "x"},
			[]string{`nmae: unknown parameter "nmae"; did you mean "name"?`}},
		{"an unrelated unknown key lists the known names", map[string]any{"node_count": 1, "zzzzzzzz": 1},
			[]string{`zzzzzzzz: unknown parameter "zzzzzzzz"; known parameters: node_count, method, name, version, timeout, ratio, labels, headers, items, auth, json, limit, codes, cidr, url, flag, big, level, semver, wait`}},
		{"an unknown key that is not a plain name is quoted", map[string]any{"node_count": 1, "a.b": 1},
			[]string{`["a.b"]: unknown parameter "a.b"; known parameters: node_count, method, name, version, timeout, ratio, labels, headers, items, auth, json, limit, codes, cidr, url, flag, big, level, semver, wait`}},
		{"list elements are checked with their index", map[string]any{"node_count": 1, "labels": []any{"ok", "NO"}},
			[]string{`labels[1]: must match ^[a-z]+$ (got "NO")`}},
		{"a list longer than maxlen is reported as items", map[string]any{"node_count": 1, "labels": []any{"a", "b", "c", "d"}},
			[]string{"labels: must have at most 3 items (got 4)"}},
		{"nested struct problems carry the full path", map[string]any{"node_count": 1,
			"items": []any{map[string]any{"name": "a"}, map[string]any{"name": "toolong", "size": 0, "colour": 1}}},
			[]string{
				"items[1].name: must be at most 5 characters (got 7)",
				"items[1].size: must be at least 1 (got 0)",
				`items[1].colour: unknown parameter "colour"; known parameters: name, size`,
			}},
		{"a map value of the wrong type names its key", map[string]any{"node_count": 1, "headers": map[string]any{"X-Foo": 1}},
			[]string{"headers.X-Foo: must be a string (got integer 1)"}},
		{"a map key with dots is quoted in the path", map[string]any{"node_count": 1, "headers": map[string]any{"a.b": true}},
			[]string{`headers["a.b"]: must be a string (got boolean true)`}},
		{"a required field of a nested struct is reported", map[string]any{"node_count": 1, "auth": map[string]any{"password": "p"}},
			[]string{"auth.username: is required"}},
		{"a required string must not be empty", map[string]any{"node_count": 1, "auth": map[string]any{"username": ""}},
			[]string{"auth.username: is required (got an empty string)"}},
		{"a float out of range is reported", map[string]any{"node_count": 1, "ratio": 1.5},
			[]string{"ratio: must be between 0 and 1 (got 1.5)"}},
		{"a bad CIDR is reported", map[string]any{"node_count": 1, "cidr": "10.0.0.0"},
			[]string{`cidr: must be a CIDR like 10.0.0.0/16 (got "10.0.0.0")`}},
		{"a relative URL is not a URI", map[string]any{"node_count": 1, "url": "example.com/x"},
			[]string{`url: must be an absolute URI like https://example.com/path (got "example.com/x")`}},
		{"an integer enum is checked", map[string]any{"node_count": 1, "level": 4},
			[]string{"level: must be one of 1, 2, 3 (got 4)"}},
		{"a bad semver is reported", map[string]any{"node_count": 1, "semver": "1.2"},
			[]string{`semver: must be a semantic version like v1.2.3 (got "1.2")`}},
		{"a duration-formatted string is checked", map[string]any{"node_count": 1, "wait": "5 min"},
			[]string{`wait: must be a duration like 30s or 5m (got "5 min")`}},
		{"a boolean field rejects a string", map[string]any{"node_count": 1, "flag": "yes"},
			[]string{`flag: must be a boolean (got string "yes")`}},
		{"a list field rejects a scalar", map[string]any{"node_count": 1, "labels": "a"},
			[]string{`labels: must be a list (got string "a")`}},
		{"an unevaluated expression is rejected at run time", map[string]any{"node_count": steps.Dynamic{}},
			[]string{"node_count: is an unevaluated expression"}},
		{"every problem is collected", map[string]any{"node_count": 0, "method": "X", "nmae": 1},
			[]string{
				"node_count: must be between 1 and 10 (got 0)",
				`method: must be one of GET, POST (got "X")`,
				`nmae: unknown parameter "nmae"; did you mean "name"?`,
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, extra, problems := d.Decode(tt.with)
			assert.Nil(t, extra)
			assert.Equal(t, tt.want, messages(problems))
			if tt.want == nil {
				assert.IsType(t, &testParams{}, p)
			} else {
				assert.Nil(t, p, "params are nil when there are problems")
			}
		})
	}
}

func TestDecodeValues(t *testing.T) {
	d := register(t, steps.Descriptor{Params: testParams{}})

	t.Run("defaults fill absent fields", func(t *testing.T) {
		p, _, problems := d.Decode(map[string]any{"node_count": 2})
		require.Empty(t, problems)
		got := p.(*testParams)
		assert.Equal(t, "GET", got.Method)
		assert.Equal(t, 30*time.Second, got.Timeout.Std())
		assert.Equal(t, []int{0, 2}, got.Codes)
		assert.True(t, got.Flag)
		assert.Nil(t, got.Limit, "an absent pointer stays nil")
		assert.Nil(t, got.Auth)
	})
	t.Run("defaults are fresh copies for each decode", func(t *testing.T) {
		p1, _, _ := d.Decode(map[string]any{"node_count": 2})
		p1.(*testParams).Codes[0] = 99
		p2, _, _ := d.Decode(map[string]any{"node_count": 2})
		assert.Equal(t, []int{0, 2}, p2.(*testParams).Codes)
	})
	t.Run("given values override defaults and convert", func(t *testing.T) {
		p, _, problems := d.Decode(map[string]any{
			"node_count": int64(10), "method": "POST", "timeout": "1h30m", "flag": false,
			"codes": []any{200.0, 201}, "limit": 0, "big": float64(1 << 40),
			"headers": map[string]any{"X-A": "1"}, "auth": map[string]any{"username": "u"},
			"json":   map[string]any{"text": "hi", "n": []any{1}},
			"items":  []any{map[string]any{"name": "a", "size": 2}},
			"labels": []string{"a", "b"},
		})
		require.Empty(t, problems)
		got := p.(*testParams)
		assert.Equal(t, 10, got.NodeCount)
		assert.Equal(t, 90*time.Minute, got.Timeout.Std())
		assert.False(t, got.Flag)
		assert.Equal(t, []int{200, 201}, got.Codes)
		require.NotNil(t, got.Limit)
		assert.Equal(t, 0, *got.Limit)
		assert.Equal(t, int64(1<<40), got.Big)
		assert.Equal(t, map[string]string{"X-A": "1"}, got.Headers)
		assert.Equal(t, &testAuth{Username: "u"}, got.Auth)
		assert.Equal(t, map[string]any{"text": "hi", "n": []any{1}}, got.JSON)
		assert.Equal(t, []testItem{{Name: "a", Size: 2}}, got.Items)
		assert.Equal(t, []string{"a", "b"}, got.Labels)
	})
	t.Run("an explicit empty list does not get the default", func(t *testing.T) {
		p, _, problems := d.Decode(map[string]any{"node_count": 2, "codes": []any{}})
		require.Empty(t, problems)
		assert.Equal(t, []int{}, p.(*testParams).Codes)
	})
}

func TestDecodeOpenParams(t *testing.T) {
	t.Run("unknown keys of an open step come back as extra", func(t *testing.T) {
		d := register(t, steps.Descriptor{Params: testAuth{}, OpenParams: true})
		p, extra, problems := d.Decode(map[string]any{"username": "u", "other": 1})
		require.Empty(t, problems)
		assert.Equal(t, &testAuth{Username: "u"}, p)
		assert.Equal(t, map[string]any{"other": 1}, extra)
	})
	t.Run("a step without params takes every key as extra when open", func(t *testing.T) {
		d := register(t, steps.Descriptor{OpenParams: true})
		p, extra, problems := d.Decode(map[string]any{"a": 1, "b": "x"})
		require.Empty(t, problems)
		assert.Nil(t, p)
		assert.Equal(t, map[string]any{"a": 1, "b": "x"}, extra)
	})
	t.Run("a step without params rejects any key when closed", func(t *testing.T) {
		d := register(t, steps.Descriptor{})
		_, _, problems := d.Decode(map[string]any{"a": 1})
		assert.Equal(t, []string{`a: unknown parameter "a"; this step takes no parameters`}, messages(problems))
	})
}

type pairParams struct {
	JSON any    `json:"json"`
	Body string `json:"body"`
	Min  int    `json:"min"`
	Max  int    `json:"max"`
}

// checkPair is a Check that reports both json and body, and min > max,
// skipping rules that involve dynamic fields.
func checkPair(params any, dynamic map[string]bool) []fault.Problem {
	p := params.(*pairParams)
	var out []fault.Problem
	if p.JSON != nil && (p.Body != "" || dynamic["body"]) && !dynamic["json"] {
		out = append(out, fault.Problem{Path: "body", Message: "cannot be used with json"})
	}
	if !dynamic["min"] && !dynamic["max"] && p.Min > p.Max {
		out = append(out, fault.Problem{Path: "min", Message: fmt.Sprintf("must not exceed max (%d)", p.Max)})
	}
	return out
}

func TestCheck(t *testing.T) {
	d := register(t, steps.Descriptor{Params: pairParams{}, Check: checkPair})
	t.Run("Decode runs Check on the decoded params", func(t *testing.T) {
		_, _, problems := d.Decode(map[string]any{"json": 1, "body": "x", "min": 2, "max": 1})
		assert.Equal(t, []string{"body: cannot be used with json", "min: must not exceed max (1)"}, messages(problems))
	})
	t.Run("Check is told about fields that already have a problem", func(t *testing.T) {
		_, _, problems := d.Decode(map[string]any{"min": "2", "max": 1})
		assert.Equal(t, []string{`min: must be an integer (got string "2")`}, messages(problems))
	})
	t.Run("CheckLiteral passes dynamic top-level names to Check", func(t *testing.T) {
		problems := d.CheckLiteral(map[string]any{"min": steps.Dynamic{}, "max": 1, "json": map[string]any{"a": steps.Dynamic{}}, "body": steps.Dynamic{}})
		assert.Equal(t, []string{"body: cannot be used with json"}, messages(problems))
	})
}

func TestCheckLiteral(t *testing.T) {
	d := register(t, steps.Descriptor{Params: testParams{}})
	tests := []struct {
		name string
		with map[string]any
		want []string
	}{
		{"a dynamic required field counts as present", map[string]any{"node_count": steps.Dynamic{}}, nil},
		{"a dynamic list element is skipped", map[string]any{"node_count": 1, "labels": []any{steps.Dynamic{}, "BAD"}},
			[]string{`labels[1]: must match ^[a-z]+$ (got "BAD")`}},
		{"a dynamic nested field counts as present", map[string]any{"node_count": 1, "auth": map[string]any{"username": steps.Dynamic{}}}, nil},
		{"a dynamic map value is skipped", map[string]any{"node_count": 1, "headers": map[string]any{"A": steps.Dynamic{}}}, nil},
		{"literal values are still checked next to dynamic ones", map[string]any{"node_count": steps.Dynamic{}, "method": "X", "url": steps.Dynamic{}},
			[]string{`method: must be one of GET, POST (got "X")`}},
		{"every literal problem is collected", map[string]any{"node_count": 11, "nmae": 1, "timeout": "later"},
			[]string{
				"node_count: must be between 1 and 10 (got 11)",
				`timeout: must be a duration like 30s or 5m (got "later")`,
				`nmae: unknown parameter "nmae"; did you mean "name"?`,
			}},
		{"a missing required field is still reported", map[string]any{"method": steps.Dynamic{}}, []string{"node_count: is required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, messages(d.CheckLiteral(tt.with)))
		})
	}
}

// TestDecodeLiteralNamesNestedDynamicPaths: Check learns which values
// inside literal lists and objects are computed, so it can judge the rest.
func TestDecodeLiteralNamesNestedDynamicPaths(t *testing.T) {
	d := register(t, steps.Descriptor{Params: testParams{}})
	_, dyn := d.DecodeLiteral(map[string]any{
		"node_count": steps.Dynamic{},
		"labels":     []any{"a", steps.Dynamic{}},
		"items":      []any{map[string]any{"name": "x", "size": steps.Dynamic{}}, steps.Dynamic{}},
		"auth":       map[string]any{"username": steps.Dynamic{}},
		"headers":    map[string]any{"X-Id": steps.Dynamic{}},
		"name":       "plain",
	})
	assert.Equal(t, map[string]bool{
		"node_count": true, "labels[1]": true, "items[0].size": true, "items[1]": true,
		"auth.username": true, "headers.X-Id": true,
	}, dyn)
	_, dyn = d.DecodeLiteral(map[string]any{"node_count": 1, "labels": []any{"a"}})
	assert.Nil(t, dyn, "nothing computed")
}
