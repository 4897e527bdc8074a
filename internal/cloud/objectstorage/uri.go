package objectstorage

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Scheme is the URI scheme of object storage paths.
const Scheme = "obs://"

// MaxURILength is the longest URI accepted: the spec's path limit.
const MaxURILength = 255

// URI is a parsed obs:// path.
type URI struct {
	Host      string // e.g. kr1-api-object-storage.nhncloudservice.com
	Account   string // AUTH_<tenant>
	Container string
	Object    string // "", an object name, or a prefix ending in "/"
}

// Tenant returns the tenant ID of the account.
func (u URI) Tenant() string { return strings.TrimPrefix(u.Account, "AUTH_") }

// String formats the URI back.
func (u URI) String() string {
	s := Scheme + u.Host + "/v1/" + u.Account + "/" + u.Container
	if u.Object != "" {
		s += "/" + u.Object
	}
	return s
}

// IsPrefix reports whether the URI names a prefix (or a whole container)
// rather than one object.
func (u URI) IsPrefix() bool { return u.Object == "" || strings.HasSuffix(u.Object, "/") }

// Join returns the URI of name below this prefix.
func (u URI) Join(name string) URI {
	u.Object += name
	return u
}

// ParseURI splits obs://{host}/v1/AUTH_{tenant}/{container}/{object}.
// The object may be empty (the whole container) or a prefix ending in "/".
func ParseURI(uri string) (host, account, container, object string, err error) {
	u, err := Parse(uri)
	if err != nil {
		return "", "", "", "", err
	}
	return u.Host, u.Account, u.Container, u.Object, nil
}

// Parse is ParseURI returning a URI.
func Parse(uri string) (URI, error) {
	const shape = "obs://{host}/v1/AUTH_{tenant}/{container}/{object}"
	bad := func(format string, args ...any) (URI, error) {
		return URI{}, fmt.Errorf("object storage URI %q: %s (want %s)", uri, fmt.Sprintf(format, args...), shape)
	}
	switch {
	case uri == "":
		return bad("empty")
	case len(uri) > MaxURILength:
		return URI{}, fmt.Errorf("object storage URI is %d characters long; the limit is %d", len(uri), MaxURILength)
	case !utf8.ValidString(uri):
		return bad("not valid UTF-8")
	case strings.ContainsAny(uri, "?#"):
		return bad("no query or fragment allowed")
	}
	for _, r := range uri {
		if r < 0x20 || r == 0x7f {
			return bad("control character")
		}
	}
	if !strings.HasPrefix(uri, Scheme) {
		return bad("must start with %s", Scheme)
	}
	rest := uri[len(Scheme):]
	host, rest, ok := strings.Cut(rest, "/")
	if host == "" || strings.ContainsAny(host, " @\\") {
		return bad("missing or malformed host")
	}
	if !ok {
		return bad("no path after the host")
	}
	version, rest, _ := strings.Cut(rest, "/")
	if version != "v1" {
		return bad("the path must start with /v1/")
	}
	account, rest, _ := strings.Cut(rest, "/")
	if !strings.HasPrefix(account, "AUTH_") || len(account) == len("AUTH_") {
		return bad("the account must be AUTH_{tenant}")
	}
	container, object, _ := strings.Cut(rest, "/")
	if container == "" {
		return bad("no container")
	}
	if container == "." || container == ".." {
		return bad("container %q is not allowed", container)
	}
	if object != "" {
		for _, seg := range strings.Split(object, "/") {
			if seg == "." || seg == ".." {
				return bad("object segments . and .. are not allowed")
			}
		}
		if strings.Contains(strings.TrimSuffix(object, "/"), "//") || strings.HasPrefix(object, "/") {
			return bad("empty path segment in the object name")
		}
	}
	return URI{Host: host, Account: account, Container: container, Object: object}, nil
}
