package jsonvalue_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/jsonvalue"
)

func TestDecodeGivesIntegersAndFloatsAsYAMLDoes(t *testing.T) {
	v, err := jsonvalue.Decode([]byte(`{"n": 3, "f": 1.5, "big": 9223372036854775808, "l": [1, {"x": 2.0}], "s": "a", "b": true, "z": null}`))
	require.NoError(t, err)
	assert.Equal(t, map[string]any{
		"n": int64(3), "f": 1.5, "big": 9.223372036854775808e18, "l": []any{int64(1), map[string]any{"x": float64(2)}},
		"s": "a", "b": true, "z": nil,
	}, v)
}

func TestDecodeRefusesWhatCouldNotBeStoredAgain(t *testing.T) {
	_, err := jsonvalue.Decode([]byte(`{"a": 1} {"b": 2}`))
	assert.EqualError(t, err, "data after the JSON value")
	_, err = jsonvalue.Decode([]byte(`[1e400]`))
	assert.EqualError(t, err, "number 1e400 is out of range")
	_, err = jsonvalue.Decode([]byte(`{"a": `))
	assert.Error(t, err)
}
