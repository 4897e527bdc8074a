package ssh_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	xssh "golang.org/x/crypto/ssh"
)

func itoa(n int) string { return strconv.Itoa(n) }

// fingerprint is the SHA256 fingerprint of an authorized_keys line.
func fingerprint(t *testing.T, line string) string {
	t.Helper()
	k, _, _, _, err := xssh.ParseAuthorizedKey([]byte(line))
	require.NoError(t, err)
	return xssh.FingerprintSHA256(k)
}
