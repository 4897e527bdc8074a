package server

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"time"
)

// Limits bound what one client can hold of the server. A zero field takes
// its default (the Default* constants); MaxConnsPerAddress < 0 means no
// bound.
type Limits struct {
	// ReadHeaderTimeout bounds the reading of a request's headers,
	// ReadTimeout the reading of the whole request, body included: a
	// client that sends its body a byte at a time is cut off when it
	// lapses, whatever the route.
	ReadHeaderTimeout, ReadTimeout time.Duration
	// WriteTimeout bounds a request from the end of its headers to the end
	// of its answer. The streams (a run's events and log lines, followed)
	// lift both deadlines once the caller is authenticated.
	WriteTimeout time.Duration
	// IdleTimeout closes a kept-alive connection with no request.
	IdleTimeout time.Duration
	// MaxConnsPerAddress bounds the connections one IP address holds open
	// before it has authenticated: a connection that carried an
	// authenticated API request, or a webhook delivery the intake accepted
	// (its signature verified), no longer counts. Connections beyond it
	// are closed as they are accepted.
	MaxConnsPerAddress int
}

// The defaults of Limits.
const (
	DefaultReadHeaderTimeout  = 10 * time.Second
	DefaultReadTimeout        = 30 * time.Second
	DefaultWriteTimeout       = 60 * time.Second
	DefaultIdleTimeout        = 2 * time.Minute
	DefaultMaxConnsPerAddress = 256
)

func (l Limits) withDefaults() Limits {
	if l.ReadHeaderTimeout <= 0 {
		l.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if l.ReadTimeout <= 0 {
		l.ReadTimeout = DefaultReadTimeout
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = DefaultWriteTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	if l.MaxConnsPerAddress == 0 {
		l.MaxConnsPerAddress = DefaultMaxConnsPerAddress
	}
	return l
}

// httpServer is the server of the TCP listener, with the limits applied.
func (s *Server) httpServer(l Limits) *http.Server {
	return &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if tc, ok := c.(*tls.Conn); ok {
				c = tc.NetConn()
			}
			if lc, ok := c.(*limitedConn); ok {
				return context.WithValue(ctx, limitedConnKey{}, lc)
			}
			return ctx
		},
	}
}

// streaming lifts the read and write deadlines of a request that streams
// (a followed run log): the limits bound how long a client may take to
// ask, not how long it may listen.
func streaming(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
}

// authenticated tells the connection bound that the request's connection
// carries an authenticated caller: it stops counting against its address.
func authenticated(ctx context.Context) {
	if lc, ok := ctx.Value(limitedConnKey{}).(*limitedConn); ok {
		lc.release()
	}
}

type limitedConnKey struct{}

// connBound is a listener that closes the connections of an address past
// max unauthenticated ones.
type connBound struct {
	net.Listener
	max int

	mu   sync.Mutex
	open map[string]int
}

func boundConns(ln net.Listener, max int) net.Listener {
	if max < 0 {
		return ln
	}
	return &connBound{Listener: ln, max: max, open: map[string]int{}}
}

func (b *connBound) Accept() (net.Conn, error) {
	for {
		c, err := b.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := addressOf(c.RemoteAddr())
		b.mu.Lock()
		over := b.open[ip] >= b.max
		if !over {
			b.open[ip]++
		}
		b.mu.Unlock()
		if over {
			_ = c.Close()
			continue
		}
		return &limitedConn{Conn: c, b: b, ip: ip}, nil
	}
}

// held is how many counted connections ip holds (for tests).
func (b *connBound) held(ip string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.open[ip]
}

func addressOf(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

type limitedConn struct {
	net.Conn
	b    *connBound
	ip   string
	once sync.Once
}

func (c *limitedConn) release() {
	c.once.Do(func() {
		c.b.mu.Lock()
		if c.b.open[c.ip]--; c.b.open[c.ip] <= 0 {
			delete(c.b.open, c.ip)
		}
		c.b.mu.Unlock()
	})
}

func (c *limitedConn) Close() error {
	c.release()
	return c.Conn.Close()
}
