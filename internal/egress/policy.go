package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"
)

// Rule is one destination: a prefix (CIDR, or one address) or a host name,
// exact or "*.suffix".
type Rule struct {
	Text   string // as written
	prefix netip.Prefix
	host   string // lower case; "*.example.com" keeps its "*."
}

// ParseRule reads a CIDR, an IP address or a host name.
func ParseRule(s string) (Rule, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return Rule{}, errors.New("is empty")
	}
	if p, err := netip.ParsePrefix(t); err == nil {
		return Rule{Text: t, prefix: unmapPrefix(p.Masked())}, nil
	}
	if a, err := netip.ParseAddr(strings.Trim(t, "[]")); err == nil {
		a = a.Unmap()
		return Rule{Text: t, prefix: netip.PrefixFrom(a, a.BitLen())}, nil
	}
	h := strings.ToLower(strings.TrimSuffix(t, "."))
	name := strings.TrimPrefix(h, "*.")
	if strings.ContainsAny(name, "/:*[] ") || !strings.Contains(name, ".") && name != "localhost" {
		return Rule{}, fmt.Errorf("%q is neither a CIDR, an IP address nor a host name", s)
	}
	return Rule{Text: t, host: h}, nil
}

func unmapPrefix(p netip.Prefix) netip.Prefix {
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p
}

// matches reports whether the rule covers host (as requested, lower case)
// or addr (invalid when not known).
func (r Rule) matches(host string, addr netip.Addr) bool {
	if r.host != "" {
		if suffix, ok := strings.CutPrefix(r.host, "*"); ok {
			return strings.HasSuffix(host, suffix)
		}
		return host == r.host
	}
	return addr.IsValid() && r.prefix.Contains(addr.Unmap())
}

// Defaults are the destinations refused unless an allow entry names them:
// link-local addresses and the cloud metadata services.
var Defaults = mustRules("169.254.0.0/16", "fe80::/10", "fd00:ec2::254", "metadata.google.internal")

func mustRules(ss ...string) []Rule {
	out := make([]Rule, len(ss))
	for i, s := range ss {
		r, err := ParseRule(s)
		if err != nil {
			panic(err)
		}
		out[i] = r
	}
	return out
}

// Policy is the config's http: {allow, deny}. The zero Policy applies the
// default denials only.
type Policy struct {
	Allow, Deny []Rule
}

// RefusedError is a destination the policy refuses.
type RefusedError struct {
	Host string     // as requested
	Addr netip.Addr // the resolved address, when the refusal is about it
	Why  string     // the rule: "http.deny entry 127.0.0.0/8", ...
}

func (e *RefusedError) Error() string {
	dest := e.Host
	if e.Addr.IsValid() && e.Addr.String() != e.Host {
		dest += " (" + e.Addr.String() + ")"
	}
	return "destination " + dest + " is refused by " + e.Why
}

// Check decides on host, requested by that name, reaching addr (invalid
// when only the name is known yet: then the address rules wait for it).
func (p *Policy) Check(host string, addr netip.Addr) error {
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if a, err := netip.ParseAddr(host); err == nil && !addr.IsValid() {
		addr = a
	}
	addr = addr.Unmap()
	refuse := func(why string) error { return &RefusedError{Host: host, Addr: addr, Why: why} }
	for _, r := range p.Deny {
		if r.matches(host, addr) {
			return refuse("the http.deny entry " + r.Text)
		}
	}
	for _, r := range p.Allow {
		if r.matches(host, addr) {
			return nil
		}
	}
	for _, r := range Defaults {
		if r.matches(host, addr) {
			return refuse("the default denial of " + r.Text + " (link-local and cloud metadata; name it in http.allow to reach it)")
		}
	}
	if len(p.Allow) > 0 && addr.IsValid() {
		return refuse("http.allow, which does not list it")
	}
	return nil
}

var current atomic.Pointer[Policy]

// Set makes p the process's policy. The shared transport's connections,
// dialed under the policy before, are not used again (Shared).
func Set(p Policy) {
	current.Store(&p)
	if old := shared.Swap(nil); old != nil {
		old.CloseIdleConnections()
	}
}

// Current is the process's policy (the default denials until Set).
func Current() *Policy {
	if p := current.Load(); p != nil {
		return p
	}
	return &Policy{}
}

// NewTransport is a new transport like http.DefaultTransport whose every
// connection is checked against the process's policy at dial time, and
// whose every request (redirects included) is checked by its host.
func NewTransport() *Transport {
	base := http.DefaultTransport.(*http.Transport).Clone()
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	base.DialContext = func(ctx context.Context, network, address string) (net.Conn, error) {
		return dial(ctx, d, Current(), network, address)
	}
	return &Transport{base: base}
}

// The shared transport keeps up to sharedIdlePerHost idle connections a
// host, each for sharedIdleTimeout: under the 5 s after which Apache and
// Node.js close an idle keep-alive connection by default, so a call seldom
// picks a connection its server is closing.
const (
	sharedIdlePerHost = 64
	sharedIdleTimeout = 4 * time.Second
)

var shared atomic.Pointer[Transport]

// Shared is the process's checked transport for steps' calls: a
// NewTransport whose connections are kept between calls (keep-alive), so
// a step calling a host that an earlier step called reuses its connection
// instead of dialing. Set replaces it: a connection dialed under an
// earlier policy is never used again, and the old transport's connections
// close when idle.
func Shared() *Transport {
	for {
		if t := shared.Load(); t != nil {
			return t
		}
		t := NewTransport()
		t.base.MaxIdleConns = 4 * sharedIdlePerHost
		t.base.MaxIdleConnsPerHost = sharedIdlePerHost
		t.base.IdleConnTimeout = sharedIdleTimeout
		if shared.CompareAndSwap(nil, t) {
			return t
		}
	}
}

// Transport is the checked transport NewTransport returns.
type Transport struct{ base *http.Transport }

// RoundTrip checks the request's host by name (and literal address), then
// sends it through the checked dialer.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := Current().Check(req.URL.Hostname(), netip.Addr{}); err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	return t.base.RoundTrip(req)
}

// CloseIdleConnections closes the transport's idle connections.
func (t *Transport) CloseIdleConnections() { t.base.CloseIdleConnections() }

// dial resolves address's host, keeps the addresses the policy accepts and
// dials them in turn; with none left, it returns the first refusal.
func dial(ctx context.Context, d *net.Dialer, p *Policy, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		addrs = []netip.Addr{a}
	} else if addrs, err = net.DefaultResolver.LookupNetIP(ctx, ipNetwork(network), host); err != nil {
		return nil, err
	}
	var refused, last error
	for _, a := range addrs {
		if err := p.Check(host, a); err != nil {
			if refused == nil {
				refused = err
			}
			continue
		}
		c, err := d.DialContext(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return c, nil
		}
		last = err
	}
	if last != nil {
		return nil, last
	}
	if refused != nil {
		return nil, refused
	}
	return nil, &net.DNSError{Err: "no address", Name: host, IsNotFound: true}
}

func ipNetwork(network string) string {
	switch network {
	case "tcp4":
		return "ip4"
	case "tcp6":
		return "ip6"
	}
	return "ip"
}
