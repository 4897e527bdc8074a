// Package egress is the destination policy of the HTTP requests that
// playbooks aim: http.request, notice.digest's post, and any step that
// takes a URL from a playbook, including the object storage calls whose
// host a playbook's obs:// URI names. The configured cloud connections and
// the simulators do not go through it.
//
// A Policy is a list of denied and a list of allowed destinations, each a
// CIDR or a host name ("hooks.example.com", "*.example.com"), and the
// default denials: link-local addresses (169.254.0.0/16, fe80::/10, which
// hold most clouds' metadata services), fd00:ec2::254 and
// metadata.google.internal. It decides on the address a request really
// reaches: NewTransport's transport resolves the host itself at dial time, checks every
// address (an IPv4-mapped IPv6 address is read as the IPv4 one) and dials
// only an address it accepted, so a redirect, a second resolution or a
// name that resolves to a private address (DNS rebinding) meets the same
// check. Order of decision: a deny entry refuses; else an allow entry
// accepts; else a default denial refuses; else, when allow entries exist,
// the destination is refused as not allowed.
//
// The policy is the process's (Set), like http.DefaultTransport: the
// command loads it from the config before any run starts. With an HTTP
// proxy in the environment, the dialled address is the proxy's; the
// request's host is still checked by name and literal address.
package egress
