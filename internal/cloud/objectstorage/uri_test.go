package objectstorage

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseURI(t *testing.T) {
	host := "kr1-api-object-storage.nhncloudservice.com"
	good := []struct {
		name, uri, container, object string
	}{
		{"an object", "obs://" + host + "/v1/AUTH_abc/data/train/a.csv", "data", "train/a.csv"},
		{"a prefix", "obs://" + host + "/v1/AUTH_abc/data/train/", "data", "train/"},
		{"a whole container", "obs://" + host + "/v1/AUTH_abc/data", "data", ""},
		{"a whole container with a slash", "obs://" + host + "/v1/AUTH_abc/data/", "data", ""},
	}
	for _, c := range good {
		t.Run(c.name+" parses", func(t *testing.T) {
			h, acct, cont, obj, err := ParseURI(c.uri)
			require.NoError(t, err)
			assert.Equal(t, host, h)
			assert.Equal(t, "AUTH_abc", acct)
			assert.Equal(t, c.container, cont)
			assert.Equal(t, c.object, obj)
		})
	}
	bad := []struct{ name, uri, want string }{
		{"an empty string", "", "empty"},
		{"another scheme", "s3://h/v1/AUTH_a/c/o", "must start with obs://"},
		{"no host", "obs:///v1/AUTH_a/c/o", "host"},
		{"no path", "obs://h", "no path"},
		{"another version", "obs://h/v2/AUTH_a/c/o", "/v1/"},
		{"an account without AUTH_", "obs://h/v1/abc/c/o", "AUTH_{tenant}"},
		{"an empty tenant", "obs://h/v1/AUTH_/c/o", "AUTH_{tenant}"},
		{"no container", "obs://h/v1/AUTH_a", "no container"},
		{"a dot-dot segment", "obs://h/v1/AUTH_a/c/x/../y", ". and .."},
		{"an empty segment", "obs://h/v1/AUTH_a/c/x//y", "empty path segment"},
		{"a query", "obs://h/v1/AUTH_a/c/o?x=1", "query"},
		{"too long", "obs://h/v1/AUTH_a/c/" + strings.Repeat("x", 250), "limit is 255"},
	}
	for _, c := range bad {
		t.Run(c.name+" is refused", func(t *testing.T) {
			_, _, _, _, err := ParseURI(c.uri)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

func TestURIStringRoundTrips(t *testing.T) {
	u, err := Parse("obs://h/v1/AUTH_t/c/p/")
	require.NoError(t, err)
	assert.True(t, u.IsPrefix())
	assert.Equal(t, "t", u.Tenant())
	assert.Equal(t, "obs://h/v1/AUTH_t/c/p/x/y.bin", u.Join("x/y.bin").String())
}
