package server

import (
	"context"
	"net"
	"os"
	"os/user"
	"strconv"
)

// peer is the process at the other end of a local socket connection, as
// the kernel reports it (known is false where it cannot be asked).
type peer struct {
	known    bool
	pid, uid int
}

type peerKey struct{}

// withPeer is the local server's ConnContext: it records the peer of each
// connection.
func withPeer(ctx context.Context, c net.Conn) context.Context {
	p := peer{uid: os.Getuid()}
	if uc, ok := c.(*net.UnixConn); ok {
		if pid, uid, ok := peerCred(uc); ok {
			p = peer{known: true, pid: pid, uid: uid}
		}
	}
	return context.WithValue(ctx, peerKey{}, p)
}

func peerOf(ctx context.Context) peer {
	p, ok := ctx.Value(peerKey{}).(peer)
	if !ok {
		return peer{uid: os.Getuid()}
	}
	return p
}

// user names the peer's OS user: its login name, else "uid N".
func (p peer) user() string {
	if p.uid == os.Getuid() {
		if u := os.Getenv("USER"); u != "" {
			return u
		}
	}
	if u, err := user.LookupId(strconv.Itoa(p.uid)); err == nil && u.Username != "" {
		return u.Username
	}
	return "uid " + strconv.Itoa(p.uid)
}
