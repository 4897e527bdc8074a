package core_test

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"path"
	"testing"
	"time"

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

func TestEveryCoreStepPassesTheContract(t *testing.T) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Reading the body lets the server notice the client going away.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	defer slow.Close()

	// The examples of http.request and shell name a URL and a command that
	// exist where a user runs them; for the run these stand-ins take their
	// place and keep the step busy until it is cancelled.
	standIns := map[string]map[string]any{
		"http.request": {"url": slow.URL},
		"shell":        {"command": "sleep 10"},
	}
	for _, d := range steps.All() {
		t.Run(d.Type, func(t *testing.T) {
			require.NotNil(t, d.Example, "every registered core step has an example")
			assert.Equal(t, "core", path.Base(d.Package), "the family is the package that defines the step")
			with := d.Example
			if standIn, ok := standIns[d.Type]; ok {
				exampleLoads(t, d)
				with = maps.Clone(d.Example)
				maps.Copy(with, standIn)
			}
			stepstest.Contract(t, d, with)
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
