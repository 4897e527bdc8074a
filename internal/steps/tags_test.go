package steps_test

import (
	"fmt"
	"testing"

	"github.com/runbook/runbook/internal/steps"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Inner is embedded to give an outer struct a second field named "a".
type Inner struct {
	A string `json:"a"`
}

func TestBadTagsAreRejected(t *testing.T) {
	tests := []struct {
		name   string
		params any
		want   string
	}{
		{"a bad regex", struct {
			A string `json:"a" pattern:"("`
		}{}, "pattern"},
		{"an example of no pattern", struct {
			A string `json:"a" like:"v1"`
		}{}, "like applies with a pattern"},
		{"an example its pattern refuses", struct {
			A string `json:"a" pattern:"^v\\d+$" like:"1"`
		}{}, `like: "1" does not match`},
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
		t.Run(tt.name+" panics when its type is first decoded", func(t *testing.T) {
			d := register(t, steps.Descriptor{Params: tt.params})
			defer func() {
				r := recover()
				require.NotNil(t, r)
				assert.Contains(t, fmt.Sprint(r), tt.want)
				assert.Contains(t, fmt.Sprint(r), d.Type, "the panic names the step type")
			}()
			d.Decode(map[string]any{})
		})
	}
}

func TestAPatternWithAnExampleIsToldByTheExample(t *testing.T) {
	d := register(t, steps.Descriptor{Params: struct {
		Release string   `json:"release" pattern:"^r\\d+$" like:"r12"`
		Tags    []string `json:"tags" pattern:"^[a-z]+$" like:"prod"`
	}{}})
	_, _, problems := d.Decode(map[string]any{"release": "12", "tags": []any{"ok", "NO"}})
	var msgs []string
	for _, p := range problems {
		msgs = append(msgs, p.Error())
	}
	assert.Equal(t, []string{`release: must be of the form r12 (got "12")`, `tags[1]: must be of the form prod (got "NO")`}, msgs)
	props := d.ParamsSchema()["properties"].(map[string]any)
	assert.Contains(t, fmt.Sprint(props["release"]), "examples:[r12]")
	assert.Contains(t, fmt.Sprint(props["release"]), `pattern:^r\d+$`)
}
