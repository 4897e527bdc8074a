package egress

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func policy(t *testing.T, allow, deny []string) *Policy {
	t.Helper()
	p := &Policy{}
	for _, s := range allow {
		r, err := ParseRule(s)
		require.NoError(t, err)
		p.Allow = append(p.Allow, r)
	}
	for _, s := range deny {
		r, err := ParseRule(s)
		require.NoError(t, err)
		p.Deny = append(p.Deny, r)
	}
	return p
}

func TestPolicyDecisions(t *testing.T) {
	cases := []struct {
		name        string
		allow, deny []string
		host, addr  string
		refusedBy   string // "" when accepted
	}{
		{"a public address is reached by default", nil, nil, "example.com", "93.184.216.34", ""},
		{"loopback is reached by default", nil, nil, "localhost", "127.0.0.1", ""},
		{"the metadata address is refused by default", nil, nil, "169.254.169.254", "", "the default denial of 169.254.0.0/16"},
		{"an IPv6 link-local address is refused by default", nil, nil, "x.example", "fe80::1", "the default denial of fe80::/10"},
		{"AWS's IPv6 metadata address is refused by default", nil, nil, "x.example", "fd00:ec2::254", "the default denial of fd00:ec2::254"},
		{"Google's metadata name is refused by default", nil, nil, "metadata.google.internal", "", "the default denial of metadata.google.internal"},
		{"a name resolving to the metadata address is refused", nil, nil, "rebind.example", "169.254.169.254", "the default denial of 169.254.0.0/16"},
		{"an allow entry lifts a default denial", []string{"169.254.169.254"}, nil, "169.254.169.254", "", ""},
		{"a deny CIDR refuses", nil, []string{"127.0.0.0/8"}, "127.0.0.5", "", "the http.deny entry 127.0.0.0/8"},
		{"an IPv4-mapped IPv6 address is read as IPv4", nil, []string{"127.0.0.0/8"}, "::ffff:127.0.0.1", "", "the http.deny entry 127.0.0.0/8"},
		{"a mapped resolved address is read as IPv4", nil, []string{"127.0.0.0/8"}, "loop.example", "::ffff:127.0.0.1", "the http.deny entry 127.0.0.0/8"},
		{"a deny entry in mapped form covers IPv4", nil, []string{"::ffff:10.0.0.0/104"}, "10.1.2.3", "", "the http.deny entry ::ffff:10.0.0.0/104"},
		{"deny wins over allow", []string{"127.0.0.0/8"}, []string{"127.0.0.1"}, "127.0.0.1", "", "the http.deny entry 127.0.0.1"},
		{"a deny host name refuses", nil, []string{"internal.example.com"}, "Internal.Example.com.", "", "the http.deny entry internal.example.com"},
		{"a wildcard host name refuses its subdomains", nil, []string{"*.corp.example"}, "a.b.corp.example", "", "the http.deny entry *.corp.example"},
		{"with allow entries, an address outside them is refused", []string{"10.0.0.0/8"}, nil, "example.com", "93.184.216.34", "http.allow, which does not list it"},
		{"with allow entries, an allowed host name is reached", []string{"hooks.example.com"}, nil, "hooks.example.com", "93.184.216.34", ""},
		{"with allow entries, a name alone waits for its address", []string{"10.0.0.0/8"}, nil, "example.com", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var addr netip.Addr
			if c.addr != "" {
				addr = netip.MustParseAddr(c.addr)
			}
			err := policy(t, c.allow, c.deny).Check(c.host, addr)
			if c.refusedBy == "" {
				assert.NoError(t, err)
				return
			}
			var re *RefusedError
			require.ErrorAs(t, err, &re)
			assert.Contains(t, re.Why, c.refusedBy)
		})
	}
}

func TestParseRule(t *testing.T) {
	for _, ok := range []string{"10.0.0.0/8", "127.0.0.1", "[::1]", "fe80::/10", "hooks.example.com", "*.example.com", "localhost"} {
		_, err := ParseRule(ok)
		assert.NoError(t, err, ok)
	}
	for _, bad := range []string{"", "10.0.0.0/33", "not a host", "example", "http://x.example/"} {
		_, err := ParseRule(bad)
		assert.Error(t, err, bad)
	}
}
