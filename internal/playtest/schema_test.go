package playtest

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	yaml "go.yaml.in/yaml/v4"
)

var update = flag.Bool("update", false, "rewrite schema/playbook-test.schema.json")

const schemaFile = "../../schema/playbook-test.schema.json"

// TestSchemaIsFresh fails when schema/playbook-test.schema.json does not
// match Schema() (go test ./internal/playtest -update, or runbook test
// --schema, rewrites it).
func TestSchemaIsFresh(t *testing.T) {
	got, err := Schema()
	require.NoError(t, err)
	if *update {
		require.NoError(t, os.WriteFile(schemaFile, got, 0o644))
		return
	}
	want, err := os.ReadFile(schemaFile)
	require.NoError(t, err, "schema/playbook-test.schema.json is missing: go test ./internal/playtest -update")
	if !bytes.Equal(want, got) {
		t.Fatal("schema/playbook-test.schema.json is stale: go test ./internal/playtest -update")
	}
}

// validateSchema checks a test file's YAML against the schema.
func validateSchema(t *testing.T, src []byte) error {
	t.Helper()
	var v any
	require.NoError(t, yaml.Unmarshal(src, &v))
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	require.NoError(t, err)
	s, err := Schema()
	require.NoError(t, err)
	sdoc, err := jsonschema.UnmarshalJSON(bytes.NewReader(s))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource(SchemaID, sdoc))
	sch, err := c.Compile(SchemaID)
	require.NoError(t, err)
	return sch.Validate(inst)
}

// Every shipped test file is valid for editors too.
func TestShippedTestFilesMatchTheSchema(t *testing.T) {
	files, err := filepath.Glob("../../playbooks/tests/*" + Suffix)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 4)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			require.NoError(t, err)
			assert.NoError(t, validateSchema(t, src))
		})
	}
}

// The schema underlines what the loader refuses, where a schema can say it.
func TestSchemaRefusesMistakes(t *testing.T) {
	for name, src := range map[string]string{
		"an unknown case key":     "version: 1\nplaybook: p.yaml\ncases:\n  - name: a\n    expect: {status: succeeded}\n    inputz: {}\n",
		"a case without expect":   "version: 1\nplaybook: p.yaml\ncases:\n  - name: a\n",
		"a bad run status":        "version: 1\nplaybook: p.yaml\ncases:\n  - name: a\n    expect: {status: done}\n",
		"two faults in one entry": "version: 1\nplaybook: p.yaml\ncases:\n  - name: a\n    faults: [{http: {service: nks, status: 503}, kill: {after: x}}]\n    expect: {status: failed}\n",
		"an unknown service":      "version: 1\nplaybook: p.yaml\ncases:\n  - name: a\n    expect: {calls: [{service: nkss}]}\n",
		"no cases":                "version: 1\nplaybook: p.yaml\ncases: []\n",
	} {
		t.Run(name, func(t *testing.T) {
			assert.Error(t, validateSchema(t, []byte(src)))
		})
	}
}
