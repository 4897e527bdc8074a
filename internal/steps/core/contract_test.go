package core_test

import (
	"bytes"
	"encoding/json"
	"path"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/steps"
	_ "github.com/runbook/runbook/internal/steps/core"
	"github.com/runbook/runbook/internal/steps/stepstest"
)

func desc(t *testing.T, name string) *steps.Descriptor {
	t.Helper()
	d, ok := steps.Lookup(name)
	require.True(t, ok, "step type %s is registered", name)
	return d
}

// TestEveryCoreStepIsOfTheFamilyAndItsExampleLoads checks every registered
// core step type: the family is the package that defines it, and its
// registered example, as written, loads. (The contract suite runs over
// every registered type in internal/steps/all, with stand-ins for the URL
// and the command of the http.request and shell examples.)
func TestEveryCoreStepIsOfTheFamilyAndItsExampleLoads(t *testing.T) {
	for _, d := range steps.All() {
		t.Run(d.Type, func(t *testing.T) {
			require.NotNil(t, d.Example, "every registered core step has an example")
			assert.Equal(t, "core", path.Base(d.Package), "the family is the package that defines the step")
			exampleLoads(t, d)
		})
	}
}

// exampleLoads checks d's example as written: it decodes, passes the load
// checks and matches the schema.
func exampleLoads(t *testing.T, d *steps.Descriptor) {
	t.Helper()
	_, _, problems := d.Decode(d.Example)
	assert.Empty(t, problems)
	assert.Empty(t, d.CheckLiteral(d.Example))
	b, err := json.Marshal(d.Example)
	require.NoError(t, err)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	require.NoError(t, err)
	assert.NoError(t, stepstest.CompileSchema(t, d.ParamsSchema()).Validate(doc))
}
