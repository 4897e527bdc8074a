package steps_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

type testAuth struct {
	Username string `json:"username" required:"true"`
	Password string `json:"password"`
}

type testItem struct {
	Name string `json:"name" required:"true" maxlen:"5"`
	Size int    `json:"size" min:"1"`
}

type testParams struct {
	NodeCount int               `json:"node_count" required:"true" min:"1" max:"10" desc:"number of nodes"`
	Method    string            `json:"method,omitempty" enum:"GET,POST" default:"GET"`
	Name      string            `json:"name" maxlen:"50"`
	Version   string            `json:"version" pattern:"^v\\d+$"`
	Timeout   steps.Duration    `json:"timeout" default:"30s" max:"720h"`
	Ratio     float64           `json:"ratio" min:"0" max:"1"`
	Labels    []string          `json:"labels" maxlen:"3" pattern:"^[a-z]+$"`
	Headers   map[string]string `json:"headers"`
	Items     []testItem        `json:"items"`
	Auth      *testAuth         `json:"auth"`
	JSON      any               `json:"json"`
	Limit     *int              `json:"limit"`
	Codes     []int             `json:"codes" default:"0,2"`
	CIDR      string            `json:"cidr" format:"cidr"`
	URL       string            `json:"url" format:"uri"`
	Flag      bool              `json:"flag" default:"true"`
	Big       int64             `json:"big"`
	Level     int               `json:"level" enum:"1,2,3"`
	Semver    string            `json:"semver" format:"semver"`
	Wait      string            `json:"wait" format:"duration"`
}

var seq atomic.Int64

// register registers d under a fresh test type name and returns the stored
// descriptor.
func register(t *testing.T, d steps.Descriptor) *steps.Descriptor {
	t.Helper()
	d.Type = fmt.Sprintf("test.params%d", seq.Add(1))
	if d.Run == nil {
		d.Run = func(context.Context, *steps.Call) (steps.Outputs, error) { return nil, nil }
	}
	steps.Register(d)
	got, ok := steps.Lookup(d.Type)
	require.True(t, ok)
	return got
}

func messages(ps []fault.Problem) []string {
	if len(ps) == 0 {
		return nil
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Error()
	}
	return out
}

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

// Inner is embedded to give an outer struct a second field named "a".
type Inner struct {
	A string `json:"a"`
}

func TestRegisterRejectsBadTags(t *testing.T) {
	tests := []struct {
		name   string
		params any
		want   string
	}{
		{"a bad regex", struct {
			A string `json:"a" pattern:"("`
		}{}, "pattern"},
		{"a default that violates the constraints", struct {
			A int `json:"a" max:"3" default:"5"`
		}{}, `default "5"`},
		{"a default of the wrong type", struct {
			A int `json:"a" default:"x"`
		}{}, `default "x"`},
		{"an unsupported type", struct {
			A chan int `json:"a"`
		}{}, "unsupported type"},
		{"min on a string", struct {
			A string `json:"a" min:"1"`
		}{}, "use minlen/maxlen"},
		{"an unknown format", struct {
			A string `json:"a" format:"email"`
		}{}, `unknown format "email"`},
		{"a field without a json name", struct{ A string }{}, "no json name"},
		{"a map with non-string keys", struct {
			A map[int]string `json:"a"`
		}{}, "map keys must be strings"},
		{"an enum of non-integers on an integer", struct {
			A int `json:"a" enum:"a,b"`
		}{}, "not an integer"},
		{"a duplicate json name", struct {
			Inner
			B string `json:"a"`
		}{}, "duplicate json name"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" panics at Register", func(t *testing.T) {
			defer func() {
				r := recover()
				require.NotNil(t, r)
				assert.Contains(t, fmt.Sprint(r), tt.want)
			}()
			register(t, steps.Descriptor{Params: tt.params})
		})
	}
}

func TestParamNames(t *testing.T) {
	type embedded struct {
		Region string `json:"region"`
	}
	type p struct {
		embedded
		Name string `json:"name"`
		Skip string `json:"-"`
		priv string
	}
	d := register(t, steps.Descriptor{Params: p{}})
	assert.Equal(t, []string{"region", "name"}, d.ParamNames())
	pp, _, problems := d.Decode(map[string]any{"region": "kr1", "name": "n"})
	require.Empty(t, problems)
	assert.Equal(t, "kr1", pp.(*p).Region, "embedded struct fields are flattened")
}

func TestDuration(t *testing.T) {
	for _, tt := range []struct {
		in   time.Duration
		want string
	}{{30 * time.Second, "30s"}, {5 * time.Minute, "5m"}, {90 * time.Minute, "1h30m"}, {720 * time.Hour, "720h"}, {1500 * time.Millisecond, "1.5s"}, {0, "0s"}} {
		t.Run(fmt.Sprintf("%v prints as %s", tt.in, tt.want), func(t *testing.T) {
			assert.Equal(t, tt.want, steps.Duration(tt.in).String())
		})
	}
	t.Run("JSON round trips through the string form", func(t *testing.T) {
		b, err := json.Marshal(steps.Duration(90 * time.Second))
		require.NoError(t, err)
		assert.Equal(t, `"1m30s"`, string(b))
		var d steps.Duration
		require.NoError(t, json.Unmarshal(b, &d))
		assert.Equal(t, 90*time.Second, d.Std())
		require.NoError(t, json.Unmarshal([]byte(`45`), &d))
		assert.Equal(t, 45*time.Second, d.Std(), "an integer is seconds")
		assert.Error(t, json.Unmarshal([]byte(`"soon"`), &d))
	})
}

// compileSchema compiles s as a draft 2020-12 JSON Schema.
func compileSchema(t *testing.T, s map[string]any) *jsonschema.Schema {
	t.Helper()
	doc := jsonValue(t, s)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	require.NoError(t, c.AddResource("mem://params.json", doc))
	sch, err := c.Compile("mem://params.json")
	require.NoError(t, err)
	return sch
}

func jsonValue(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	require.NoError(t, err)
	return doc
}

func TestParamsSchema(t *testing.T) {
	d := register(t, steps.Descriptor{Params: testParams{}})
	sch := compileSchema(t, d.ParamsSchema())
	tests := []struct {
		name  string
		with  map[string]any
		valid bool
	}{
		{"a minimal literal map is valid", map[string]any{"node_count": 3}, true},
		{"a full literal map is valid", map[string]any{"node_count": 3, "method": "POST", "timeout": "1h30m",
			"labels": []any{"a"}, "auth": map[string]any{"username": "u"}, "json": map[string]any{"x": []any{1}},
			"items": []any{map[string]any{"name": "a", "size": 1}}, "codes": []any{1}, "limit": 2}, true},
		{"an expression satisfies an integer", map[string]any{"node_count": "${{ inputs.n }}"}, true},
		{"an expression satisfies an enum", map[string]any{"node_count": 1, "method": "${{ inputs.method }}"}, true},
		{"an interpolated string satisfies a pattern", map[string]any{"node_count": 1, "version": "v${{ inputs.v }}"}, true},
		{"an expression satisfies a nested struct", map[string]any{"node_count": 1, "auth": "${{ secrets.auth }}"}, true},
		{"an expression satisfies a list element", map[string]any{"node_count": 1, "codes": []any{"${{ 1 + 1 }}"}}, true},
		{"a duration in seconds is valid", map[string]any{"node_count": 1, "timeout": 60}, true},
		{"a missing required field is invalid", map[string]any{}, false},
		{"a number out of range is invalid", map[string]any{"node_count": 11}, false},
		{"an enum violation is invalid", map[string]any{"node_count": 1, "method": "FETCH"}, false},
		{"an unknown key is invalid", map[string]any{"node_count": 1, "nmae": "x"}, false},
		{"a bad duration is invalid", map[string]any{"node_count": 1, "timeout": "soon"}, false},
		{"a duration above max in seconds is invalid", map[string]any{"node_count": 1, "timeout": 720*3600 + 1}, false},
		{"a plain string for an integer is invalid", map[string]any{"node_count": "three"}, false},
		{"a too long list is invalid", map[string]any{"node_count": 1, "labels": []any{"a", "b", "c", "d"}}, false},
		{"an unknown key in a nested struct is invalid", map[string]any{"node_count": 1, "auth": map[string]any{"username": "u", "x": 1}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := sch.Validate(jsonValue(t, tt.with))
			if tt.valid {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err)
			}
		})
	}

	t.Run("properties carry description and default", func(t *testing.T) {
		props := d.ParamsSchema()["properties"].(map[string]any)
		assert.Equal(t, "number of nodes", props["node_count"].(map[string]any)["description"])
		assert.Equal(t, "GET", props["method"].(map[string]any)["default"])
		assert.Equal(t, []any{"node_count"}, d.ParamsSchema()["required"])
	})
	t.Run("an open step allows additional properties", func(t *testing.T) {
		d := register(t, steps.Descriptor{Params: testAuth{}, OpenParams: true})
		sch := compileSchema(t, d.ParamsSchema())
		assert.NoError(t, sch.Validate(jsonValue(t, map[string]any{"username": "u", "other": 1})))
	})
}
