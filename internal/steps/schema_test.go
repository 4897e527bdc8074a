package steps_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/runbook/runbook/internal/steps"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
