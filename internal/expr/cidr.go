package expr

import (
	"fmt"
	"net/netip"
	"strings"
)

func argPrefix(v any) (netip.Prefix, error) {
	s, err := argString("cidr", v)
	if err != nil {
		return netip.Prefix{}, err
	}
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("invalid CIDR %q", shorten(s, 64))
	}
	return p.Masked(), nil
}

// argPrefixOrAddr parses a CIDR, or an address as a single-address prefix.
func argPrefixOrAddr(v any) (netip.Prefix, error) {
	s, err := argString("address", v)
	if err != nil {
		return netip.Prefix{}, err
	}
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("invalid IP address %q", shorten(s, 64))
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	return argPrefix(s)
}

func fnCIDRContains(_ *evalState, args []any) (any, error) {
	p, err := argPrefix(args[0])
	if err != nil {
		return nil, err
	}
	q, err := argPrefixOrAddr(args[1])
	if err != nil {
		return nil, err
	}
	return p.Addr().Is4() == q.Addr().Is4() && p.Bits() <= q.Bits() && p.Contains(q.Addr()), nil
}

func fnCIDROverlaps(_ *evalState, args []any) (any, error) {
	p, err := argPrefix(args[0])
	if err != nil {
		return nil, err
	}
	q, err := argPrefix(args[1])
	if err != nil {
		return nil, err
	}
	return p.Overlaps(q), nil
}

func fnCIDRPrefix(_ *evalState, args []any) (any, error) {
	p, err := argPrefix(args[0])
	if err != nil {
		return nil, err
	}
	return p.Bits(), nil
}

// fnCIDRHost returns the n-th address of a network (0 is the network
// address); a negative n counts from the end (-1 is the last address).
func fnCIDRHost(_ *evalState, args []any) (any, error) {
	p, err := argPrefix(args[0])
	if err != nil {
		return nil, err
	}
	n, err := argInt("host number", args[1])
	if err != nil {
		return nil, err
	}
	hostBits := p.Addr().BitLen() - p.Bits()
	if hostBits < 63 {
		size := int64(1) << hostBits
		k := int64(n)
		if k < 0 {
			k += size
		}
		if k < 0 || k >= size {
			return nil, fmt.Errorf("host number %d is outside %s (%d addresses)", n, p, size)
		}
		return addToAddr(p.Addr(), uint64(k)).String(), nil
	}
	if n < 0 {
		// last addresses: all host bits set, minus (-n-1)
		b := p.Addr().As16()
		for i := p.Bits(); i < 128; i++ {
			b[i/8] |= 1 << (7 - i%8)
		}
		sub := uint64(-(n + 1))
		for i := 15; i >= 0 && sub > 0; i-- {
			d := sub & 0xff
			sub >>= 8
			if uint64(b[i]) < d {
				b[i] = byte(uint64(b[i]) + 256 - d)
				sub++
			} else {
				b[i] -= byte(d)
			}
		}
		return netip.AddrFrom16(b).String(), nil
	}
	return addToAddr(p.Addr(), uint64(n)).String(), nil
}

// addToAddr adds k to an address.
func addToAddr(a netip.Addr, k uint64) netip.Addr {
	is4 := a.Is4()
	b := a.As16()
	carry := k
	for i := 15; i >= 0 && carry > 0; i-- {
		s := uint64(b[i]) + carry&0xff
		b[i] = byte(s)
		carry = carry>>8 + s>>8
	}
	out := netip.AddrFrom16(b)
	if is4 {
		out = out.Unmap()
	}
	return out
}
