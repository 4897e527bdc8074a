package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSchemaIsValidJSON(t *testing.T) {
	c := newCLI(t)
	r := c.run("schema")
	require.Equal(t, 0, r.code, r)
	var s map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s))
	assert.Contains(t, s, "$schema")
	assert.Contains(t, r.stdout, `"http.request"`, "step types are in the schema")
}
