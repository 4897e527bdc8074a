package expr

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func evalExpr(t *testing.T, src string) (any, error) {
	t.Helper()
	p, err := Compile(src, nil)
	require.NoError(t, err)
	return p.Eval(testScope())
}

// cidrHost follows Terraform's cidrhost: host 0 is the network address,
// a negative host number counts back from the end of the range (-1 is the
// last address), and a number outside the range is an error.
func TestCIDRHost(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"host 0 is the network address", `cidrHost("10.0.0.0/24", 0)`, "10.0.0.0"},
		{"host 0 of a single-address network is that address", `cidrHost("10.0.0.7/32", 0)`, "10.0.0.7"},
		{"-1 of a single-address network is that address", `cidrHost("10.0.0.7/32", -1)`, "10.0.0.7"},
		{"the last host number is the broadcast address", `cidrHost("10.0.0.0/24", 255)`, "10.0.0.255"},
		{"minus the size is the network address", `cidrHost("10.0.0.0/24", -256)`, "10.0.0.0"},
		{"a host number past 255 carries into the next byte", `cidrHost("10.0.0.0/8", 300)`, "10.0.1.44"},
		{"the network is masked first", `cidrHost(" 10.1.2.3/16 ", 2)`, "10.1.0.2"},
		{"-1 of 0.0.0.0/0 is the last IPv4 address", `cidrHost("0.0.0.0/0", -1)`, "255.255.255.255"},
		{"a whole float is a host number", `cidrHost("10.0.0.0/24", 3.0)`, "10.0.0.3"},
		{"an IPv4-mapped network keeps its IPv6 form", `cidrHost("::ffff:10.0.0.0/104", 3)`, "::ffff:10.0.0.3"},
		{"host 0 of an IPv6 /64 is the network address", `cidrHost("fd00::/64", 0)`, "fd00::"},
		{"host 0 of an IPv6 /65 is the network address", `cidrHost("fd00::/65", 0)`, "fd00::"},
		{"host 0 of an IPv6 /56 is the network address", `cidrHost("fd00::/56", 0)`, "fd00::"},
		{"-1 of an IPv6 /64 is its last address", `cidrHost("fd00::/64", -1)`, "fd00::ffff:ffff:ffff:ffff"},
		{"-2 of an IPv6 /64 is the one before", `cidrHost("fd00::/64", -2)`, "fd00::ffff:ffff:ffff:fffe"},
		{"-256 of an IPv6 /64 clears the last byte", `cidrHost("fd00::/64", -256)`, "fd00::ffff:ffff:ffff:ff00"},
		{"-257 of an IPv6 /64 counts back across a byte", `cidrHost("fd00::/64", -257)`, "fd00::ffff:ffff:ffff:feff"},
		{"the most negative host number of an IPv6 /64 is its middle", `cidrHost("fd00::/64", -9223372036854775807 - 1)`, "fd00::8000:0:0:0"},
		{"the largest host number fits an IPv6 /64", `cidrHost("fd00::/64", 9223372036854775807)`, "fd00::7fff:ffff:ffff:ffff"},
		{"-1 of an IPv6 /65 keeps the network bit of its ninth byte", `cidrHost("fd00::8000:0:0:0/65", -1)`, "fd00::ffff:ffff:ffff:ffff"},
		{"-1 of an IPv6 /65 with the network bit clear", `cidrHost("fd00::/65", -1)`, "fd00::7fff:ffff:ffff:ffff"},
		{"a positive host number of an IPv6 /65", `cidrHost("fd00::/65", 258)`, "fd00::102"},
		{"-1 of an IPv6 /56 sets the host bits above the low 64", `cidrHost("fd00::/56", -1)`, "fd00::ff:ffff:ffff:ffff:ffff"},
		{"-1 of ::/0 is the last IPv6 address", `cidrHost("::/0", -1)`, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := evalExpr(t, tt.src)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestCIDRHostErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"the size of the network is outside it", `cidrHost("10.0.0.0/24", 256)`, "cidrHost: host number 256 is outside 10.0.0.0/24 (256 addresses)"},
		{"one before minus the size is outside it", `cidrHost("10.0.0.0/24", -257)`, "cidrHost: host number -257 is outside 10.0.0.0/24 (256 addresses)"},
		{"host 1 of a single address is outside it", `cidrHost("10.0.0.7/32", 1)`, "cidrHost: host number 1 is outside 10.0.0.7/32 (1 addresses)"},
		{"a fraction is not a host number", `cidrHost("10.0.0.0/24", 1.5)`, "cidrHost: host number must be an integer, got number"},
		{"a string is not a host number", `cidrHost("10.0.0.0/24", "1")`, "cidrHost: host number must be an integer, got string"},
		{"the network must be a string", `cidrHost(1, 1)`, "cidrHost: cidr must be a string, got integer"},
		{"an address without a prefix length is not a network", `cidrHost("10.0.0.0", 1)`, `cidrHost: invalid CIDR "10.0.0.0"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := evalExpr(t, tt.src)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

func TestCIDRContainsAndOverlaps(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want any
	}{
		{"a network contains itself", `cidrContains("10.0.0.0/8", "10.0.0.0/8")`, true},
		{"a host route contains its address", `cidrContains("10.0.0.7/32", "10.0.0.7")`, true},
		{"a network contains its last address", `cidrContains("10.0.0.0/8", "10.255.255.255")`, true},
		{"a network does not contain the address after it", `cidrContains("10.0.0.0/8", "11.0.0.0")`, false},
		{"a network does not contain a wider one at the same address", `cidrContains("10.0.0.0/16", "10.0.0.0/8")`, false},
		{"an address may have spaces around it", `cidrContains("10.0.0.0/8", " 10.1.2.3 ")`, true},
		{"an IPv4-mapped address is its IPv4 address", `cidrContains("10.0.0.0/8", "::ffff:10.1.2.3")`, true},
		{"an IPv4 network does not contain an IPv6 address", `cidrContains("0.0.0.0/0", "::1")`, false},
		{"an IPv6 network does not contain an IPv4 address", `cidrContains("::/0", "10.0.0.1")`, false},
		{"an IPv6 network contains its addresses", `cidrContains("fd00::/64", "fd00::ffff:1")`, true},
		{"a network overlaps itself", `cidrOverlaps("10.0.0.0/8", "10.0.0.0/8")`, true},
		{"overlap ignores the order", `cidrOverlaps("10.0.255.0/24", "10.0.0.0/16")`, true},
		{"adjacent networks do not overlap", `cidrOverlaps("10.0.0.0/25", "10.0.0.128/25")`, false},
		{"the prefix length ignores the host bits", `cidrPrefix("10.1.2.3/8")`, 8},
		{"an IPv6 prefix length", `cidrPrefix("fd00::/56")`, 56},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := evalExpr(t, tt.src)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestCIDRArgumentErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"cidrContains wants a network first", `cidrContains(1, "10.0.0.1")`, "cidrContains: cidr must be a string, got integer"},
		{"cidrContains refuses a bad network", `cidrContains("10.0.0.0/33", "10.0.0.1")`, `cidrContains: invalid CIDR "10.0.0.0/33"`},
		{"cidrContains wants a string address", `cidrContains("10.0.0.0/8", 1)`, "cidrContains: address must be a string, got integer"},
		{"cidrContains refuses a bad address", `cidrContains("10.0.0.0/8", "10.0.0.x")`, `cidrContains: invalid IP address "10.0.0.x"`},
		{"cidrContains refuses a bad second network", `cidrContains("10.0.0.0/8", "10.0.0.0/x")`, `cidrContains: invalid CIDR "10.0.0.0/x"`},
		{"cidrOverlaps wants a first network", `cidrOverlaps(1, "10.0.0.0/8")`, "cidrOverlaps: cidr must be a string, got integer"},
		{"cidrOverlaps wants a second network", `cidrOverlaps("10.0.0.0/8", "10.0.0.1")`, `cidrOverlaps: invalid CIDR "10.0.0.1"`},
		{"cidrPrefix wants a string", `cidrPrefix(nil)`, "cidrPrefix: cidr must be a string, got null"},
		{"a long bad CIDR is shortened in the message", `cidrPrefix(repeat("1", 100))`, `cidrPrefix: invalid CIDR "` + "1111111111111111111111111111111111111111111111111111111111111111" + `…"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := evalExpr(t, tt.src)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}
