package playbook

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const schemaFile = "../../schema/playbook.schema.json"

// TestSchemaIsFresh fails when schema/playbook.schema.json does not match
// the step registry (go test ./internal/playbook -update rewrites it).
func TestSchemaIsFresh(t *testing.T) {
	got, err := Schema()
	require.NoError(t, err)
	if *update {
		require.NoError(t, os.WriteFile(schemaFile, got, 0o644))
		return
	}
	want, err := os.ReadFile(schemaFile)
	require.NoError(t, err, "schema/playbook.schema.json is missing: run make schema")
	if string(want) != string(got) {
		t.Fatal("schema/playbook.schema.json is stale: run make schema")
	}
}

func TestSchemaIsDeterministic(t *testing.T) {
	a, err := Schema()
	require.NoError(t, err)
	b, err := Schema()
	require.NoError(t, err)
	assert.Equal(t, string(a), string(b))
	assert.Equal(t, byte('\n'), a[len(a)-1])
}

// TestGoodPlaybooksMatchTheSchema validates every good playbook against
// the schema.
func TestGoodPlaybooksMatchTheSchema(t *testing.T) {
	files, err := filepath.Glob("testdata/good/*.yaml")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 2, "the good playbooks are found")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			require.NoError(t, err)
			assert.NoError(t, ValidateSchema(src))
		})
	}
}

// TestSchemaRefusesWhatTheLoaderRefuses checks that the schema catches
// the mistakes an editor should underline.
func TestSchemaRefusesWhatTheLoaderRefuses(t *testing.T) {
	for _, name := range []string{
		"unknown_top_key", "unknown_step_key", "enum_log_level", "unknown_param",
		"missing_required_param", "unknown_step_type", "version_2", "missing_name",
		"empty_steps", "bad_on_busy", "out_of_range", "bad_duration", "wrong_type",
	} {
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile("testdata/bad/" + name + ".yaml")
			require.NoError(t, err)
			assert.Error(t, ValidateSchema(src))
		})
	}
}
