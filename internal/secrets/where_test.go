package secrets

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWhereNamesEveryPlaceLookupReadsInOrder(t *testing.T) {
	t.Run("without a secrets file it says how to give one", func(t *testing.T) {
		s, err := NewSource(nil, "")
		require.NoError(t, err)
		assert.Equal(t, "looked up in the environment as RUNBOOK_SECRET_db-pass or RUNBOOK_SECRET_DB_PASS, "+
			"in a secrets file (none given: --secrets FILE or $RUNBOOK_SECRETS_FILE), then as db-pass in the environment",
			s.Where("db-pass"))
	})
	t.Run("with a secrets file it names the file", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "secrets.yaml")
		require.NoError(t, os.WriteFile(p, []byte("OTHER: x\n"), 0o600))
		s, err := NewSource(nil, p)
		require.NoError(t, err)
		assert.Equal(t, `looked up in the environment as RUNBOOK_SECRET_TOKEN, in the secrets file "`+p+`", then as TOKEN in the environment`, s.Where("TOKEN"))
	})
}
