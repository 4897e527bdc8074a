package server

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/fault"
)

// TLSFiles are the PEM files of the listener's certificate (its chain)
// and private key. Empty: the listener speaks plain HTTP.
type TLSFiles struct {
	Cert, Key string
}

// certs holds the listener's certificate and loads it again when asked
// (SIGHUP, through Reload) or when its files change. A pair that does not
// load keeps the previous one.
type certs struct {
	files TLSFiles

	mu       sync.Mutex
	cert     *tls.Certificate
	modified [2]time.Time // of Cert and Key when loaded
}

func loadCerts(f TLSFiles) (*certs, error) {
	c := &certs{files: f}
	if err := c.reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// reload loads the pair from its files.
func (c *certs) reload() error {
	mod, err := c.modTimes()
	if err != nil {
		return err
	}
	pair, err := tls.LoadX509KeyPair(c.files.Cert, c.files.Key)
	if err != nil {
		return fmt.Errorf("server.tls: %w", err)
	}
	c.mu.Lock()
	c.cert, c.modified = &pair, mod
	c.mu.Unlock()
	return nil
}

func (c *certs) modTimes() ([2]time.Time, error) {
	var out [2]time.Time
	for i, f := range []string{c.files.Cert, c.files.Key} {
		fi, err := os.Stat(f)
		if err != nil {
			return out, fmt.Errorf("server.tls: %w", err)
		}
		out[i] = fi.ModTime()
	}
	return out, nil
}

// changed reports whether a file changed since the pair was loaded.
func (c *certs) changed() bool {
	mod, err := c.modTimes()
	if err != nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return mod != c.modified
}

func (c *certs) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cert, nil
}

// tlsConfig is the listener's TLS: TLS 1.2 at least, the current pair.
func (c *certs) tlsConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: c.get}
}

// reloadTLS loads the certificate again; a failure keeps the previous one
// and is logged.
func (s *Server) reloadTLS() {
	if s.certs == nil {
		return
	}
	if err := s.certs.reload(); err != nil {
		s.log.Error("the TLS certificate was not reloaded; the previous one is served", "err", err)
		return
	}
	s.log.Info("TLS certificate reloaded", "cert", s.certs.files.Cert)
}

// watchCerts reloads the certificate when its files change.
func (s *Server) watchCerts(ctx context.Context) {
	if s.certs == nil {
		return
	}
	t := time.NewTicker(s.o.ReloadInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if s.certs.changed() {
				s.reloadTLS()
			}
		}
	}
}

// metricsAuth asks for the bearer token of server.metrics_token on
// /metrics, when one is set.
func (s *Server) metricsAuth(next http.Handler) http.Handler {
	if s.o.MetricsToken == "" {
		return next
	}
	want := []byte("Bearer " + s.o.MetricsToken)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(strings.TrimSpace(r.Header.Get("Authorization")))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="runbook-metrics"`)
			writeJSON(w, http.StatusUnauthorized, api.ErrorBody{Code: string(fault.Unauthorized),
				Error: "/metrics needs the token of server.metrics_token: send Authorization: Bearer TOKEN"})
			return
		}
		next.ServeHTTP(w, r)
	})
}
