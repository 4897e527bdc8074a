package notify_test

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// received is one request a receiver took.
type received struct {
	ID     string // webhook-id ("" for Slack)
	Body   map[string]any
	Raw    string
	Signed bool // the Standard Webhooks signature verified
}

// receiver is a loopback HTTP receiver of notifications: a Slack-style
// incoming webhook or, with a key, a Standard Webhooks endpoint that
// verifies every signature itself. down makes it answer 503.
type receiver struct {
	srv  *httptest.Server
	key  []byte
	mu   sync.Mutex
	got  []received
	down bool
}

func newReceiver(t *testing.T, key []byte) *receiver {
	r := &receiver{key: key}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	raw, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		return
	}
	rec := received{Raw: string(raw), ID: req.Header.Get("webhook-id")}
	if err := json.Unmarshal(raw, &rec.Body); err != nil || req.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "want JSON", http.StatusBadRequest)
		return
	}
	if r.key != nil {
		ts := req.Header.Get("webhook-timestamp")
		sec, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute {
			http.Error(w, "bad timestamp", http.StatusUnauthorized)
			return
		}
		mac := hmac.New(sha256.New, r.key)
		mac.Write([]byte(rec.ID + "." + ts + "."))
		mac.Write(raw)
		want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
		for _, sig := range strings.Fields(req.Header.Get("webhook-signature")) {
			if hmac.Equal([]byte(sig), []byte(want)) {
				rec.Signed = true
			}
		}
		if !rec.Signed {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
	}
	r.got = append(r.got, rec)
	w.WriteHeader(http.StatusOK)
}

func (r *receiver) setDown(down bool) {
	r.mu.Lock()
	r.down = down
	r.mu.Unlock()
}

func (r *receiver) messages() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// mail is one message the SMTP server accepted.
type mail struct {
	From string   `json:"from"`
	To   []string `json:"to"`
	Data string   `json:"data"`
	TLS  bool     `json:"tls"`
	Auth bool     `json:"auth"`
}

// smtpServer is Debian's aiosmtpd on loopback, requiring STARTTLS (with a
// certificate the test makes) and AUTH.
type smtpServer struct {
	Addr   string
	CAFile string
	mu     sync.Mutex
	got    []mail
}

// startSMTP starts the SMTP server; it skips without python3-aiosmtpd,
// and fails instead under CI (.ci/run installs it).
func startSMTP(t *testing.T, user, password string) *smtpServer {
	t.Helper()
	python := "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import aiosmtpd").Run(); err != nil {
		if os.Getenv("CI") == "true" || os.Getenv("RUNBOOK_REQUIRE_SMTPD") == "1" {
			t.Fatalf("python3-aiosmtpd is required (apt-get install python3-aiosmtpd): %v", err)
		}
		t.Skipf("python3-aiosmtpd is not installed: %v", err)
	}
	dir := t.TempDir()
	cert, key := selfSigned(t, dir)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(python, "testdata/smtpd.py", strconv.Itoa(port), cert, key, user, password)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	s := &smtpServer{Addr: "127.0.0.1:" + strconv.Itoa(port), CAFile: cert}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if sc.Text() == "ready" {
				close(ready)
				continue
			}
			var m mail
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				s.mu.Lock()
				s.got = append(s.got, m)
				s.mu.Unlock()
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("the SMTP server did not start in 30 s")
	}
	return s
}

func (s *smtpServer) messages() []mail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]mail(nil), s.got...)
}

// selfSigned writes a certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
