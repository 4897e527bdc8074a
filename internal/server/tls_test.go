package server_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/server"
)

// selfSigned writes a self-signed certificate for 127.0.0.1 with serial
// to cert and key, and returns it. With mtimes (cert's, key's), the files
// get those modification times before they are moved into place.
func selfSigned(t *testing.T, cert, key string, serial int64, mtimes ...time.Time) *x509.Certificate {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "runbook test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	require.NoError(t, err)
	kb, err := x509.MarshalECPrivateKey(k)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(cert+".tmp", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(key+".tmp", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))
	if len(mtimes) == 2 {
		require.NoError(t, os.Chtimes(cert+".tmp", mtimes[0], mtimes[0]))
		require.NoError(t, os.Chtimes(key+".tmp", mtimes[1], mtimes[1]))
	}
	require.NoError(t, os.Rename(key+".tmp", key))
	require.NoError(t, os.Rename(cert+".tmp", cert))
	c, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return c
}

// served is the serial of the certificate the server presents.
func served(t *testing.T, addr string) int64 {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
	require.NoError(t, err)
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// TestTLSServesTheUIAndAPIAndReloadsItsCertificate: with server.tls the
// listener speaks HTTPS with the test's self-signed certificate, refuses
// TLS 1.1, sets the session cookie Secure, and serves a new certificate
// when its files change and when asked to reload (SIGHUP).
func TestTLSServesTheUIAndAPIAndReloadsItsCertificate(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	first := selfSigned(t, cert, key, 1)
	e := newEnv(t, map[string]string{"gate.yaml": approvalPlaybook}, func(o *server.Options) {
		o.TLS = server.TLSFiles{Cert: cert, Key: key}
		o.ReloadInterval = 50 * time.Millisecond
	})
	require.True(t, strings.HasPrefix(e.srv.URL(), "https://"), e.srv.URL())
	addr := e.srv.Addr()
	pool := x509.NewCertPool()
	pool.AddCert(first)
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: 10 * time.Second,
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	t.Run("the API answers over HTTPS, and plain HTTP gets nothing", func(t *testing.T) {
		req, _ := http.NewRequest("GET", "https://"+addr+"/api/v1/playbooks", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		assert.Contains(t, string(body), `"gate"`)
		resp, err = http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			assert.NotEqual(t, http.StatusOK, resp.StatusCode)
		}
	})
	t.Run("TLS 1.1 is refused", func(t *testing.T) {
		_, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, MaxVersion: tls.VersionTLS11})
		assert.Error(t, err)
	})
	t.Run("the UI signs in with a Secure session cookie", func(t *testing.T) {
		resp, err := client.Get("https://" + addr + "/login")
		require.NoError(t, err)
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m := csrfValue.FindStringSubmatch(string(page))
		require.NotNil(t, m, "%s", page)
		req, _ := http.NewRequest("POST", "https://"+addr+"/login", strings.NewReader("csrf="+m[1]+"&token="+token))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "https://"+addr)
		resp, err = client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		var session *http.Cookie
		for _, c := range resp.Cookies() {
			if c.Value != "" && c.HttpOnly {
				session = c
			}
		}
		require.NotNil(t, session, "no session cookie: %v", resp.Header["Set-Cookie"])
		assert.True(t, session.Secure, "the session cookie over TLS is not Secure: %v", resp.Header["Set-Cookie"])
		resp, err = client.Get("https://" + addr + "/runs")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
	})

	require.Equal(t, int64(1), served(t, addr))
	t.Run("a changed certificate file is served", func(t *testing.T) {
		selfSigned(t, cert, key, 2)
		require.Eventually(t, func() bool { return served(t, addr) == 2 }, 10*time.Second, 20*time.Millisecond)
	})
	t.Run("a reload (SIGHUP) serves the files as they are", func(t *testing.T) {
		fi, err := os.Stat(cert)
		require.NoError(t, err)
		ki, err := os.Stat(key)
		require.NoError(t, err)
		// Same times as before: the watcher sees no change, the reload reads them.
		selfSigned(t, cert, key, 3, fi.ModTime(), ki.ModTime())
		time.Sleep(200 * time.Millisecond)
		require.Equal(t, int64(2), served(t, addr), "the watcher reloaded files whose times did not change")
		require.NoError(t, e.srv.Reload())
		assert.Equal(t, int64(3), served(t, addr))
	})
	t.Run("a broken pair keeps the previous certificate", func(t *testing.T) {
		require.NoError(t, os.WriteFile(cert, []byte("not a certificate"), 0o600))
		require.NoError(t, e.srv.Reload())
		assert.Equal(t, int64(3), served(t, addr))
	})
}

// TestMetricsAskForTheMetricsToken: with server.metrics_token set,
// /metrics answers 401 without it and serves with it.
func TestMetricsAskForTheMetricsToken(t *testing.T) {
	e := newEnv(t, map[string]string{"gate.yaml": approvalPlaybook}, func(o *server.Options) { o.MetricsToken = "scrape-me" })
	assert.Equal(t, http.StatusUnauthorized, e.do("GET", "/metrics", "", nil).status)
	assert.Equal(t, http.StatusUnauthorized, e.do("GET", "/metrics", token, nil).status, "the API token is not the metrics token")
	r := e.do("GET", "/metrics", "scrape-me", nil)
	assert.Equal(t, http.StatusOK, r.status)
	assert.Contains(t, string(r.body), "runbook_")
}
