package ssh

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	xssh "golang.org/x/crypto/ssh"

	"github.com/runbook/runbook/internal/fault"
)

// dial connects to t through its jump hosts, each hop within
// connectTimeout, and logs in. closeAll closes every connection (the
// target's first) and may be called more than once. Until it returns,
// the end of ctx closes what was opened, which ends a hung handshake.
func dial(ctx context.Context, t *target, connectTimeout time.Duration) (client *xssh.Client, closeAll func(), err error) {
	var closers []func()
	var once sync.Once
	closeAll = func() {
		once.Do(func() {
			for i := len(closers) - 1; i >= 0; i-- {
				closers[i]()
			}
		})
	}
	hops := []*target{}
	for at := t; at != nil; at = at.via {
		hops = append([]*target{at}, hops...)
	}
	var via *xssh.Client
	for _, hop := range hops {
		c, closeHop, err := dialHop(ctx, hop, via, connectTimeout)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		closers = append(closers, closeHop)
		via = c
	}
	return via, closeAll, nil
}

// dialHop opens a connection to t, directly or through via, and logs in.
func dialHop(ctx context.Context, t *target, via *xssh.Client, timeout time.Duration) (*xssh.Client, func(), error) {
	cfg, closeAgent, err := t.clientConfig()
	if err != nil {
		return nil, nil, err
	}
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var conn net.Conn
	if via == nil {
		conn, err = (&net.Dialer{}).DialContext(hctx, "tcp", t.addr())
	} else {
		conn, err = via.DialContext(hctx, "tcp", t.addr())
	}
	if err != nil {
		closeAgent()
		return nil, nil, unreachable(t, via, hctx, timeout, err)
	}
	// A handshake that hangs ends with the context: its connection closes.
	stop := context.AfterFunc(hctx, func() { conn.Close() })
	cc, chans, reqs, err := xssh.NewClientConn(conn, t.addr(), cfg)
	if !stop() || err != nil {
		conn.Close()
		closeAgent()
		if err == nil {
			err = hctx.Err()
		}
		return nil, nil, loginFailed(t, hctx, timeout, err)
	}
	client := xssh.NewClient(cc, chans, reqs)
	return client, func() { client.Close(); closeAgent() }, nil
}

func unreachable(t *target, via *xssh.Client, ctx context.Context, timeout time.Duration, err error) error {
	how := ""
	if via != nil {
		how = " through its jump host"
	}
	if ctx.Err() == context.DeadlineExceeded {
		return &fault.Error{Code: fault.Unavailable, Message: fmt.Sprintf("host %s: no connection%s within %s", t.label(), how, timeout), Err: err}
	}
	return &fault.Error{Code: fault.Unavailable, Message: fmt.Sprintf("host %s: connect%s", t.label(), how), Err: err}
}

// loginFailed words a failed handshake: a refused host key as it is, a
// refused login, a timeout.
func loginFailed(t *target, ctx context.Context, timeout time.Duration, err error) error {
	var fe *fault.Error
	if errors.As(err, &fe) {
		return fe
	}
	if ctx.Err() == context.DeadlineExceeded {
		return &fault.Error{Code: fault.Unavailable, Message: fmt.Sprintf("host %s: no SSH handshake within %s", t.label(), timeout), Err: err}
	}
	return &fault.Error{Code: fault.Unauthorized, Message: fmt.Sprintf("host %s: log in as %s", t.label(), t.User), Err: err}
}
