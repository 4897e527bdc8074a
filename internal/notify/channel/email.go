package channel

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/mail"
	"net/smtp"
	"os"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// email sends a message over SMTP: STARTTLS before anything else (unless
// the channel turns it off), AUTH PLAIN when it has a username.
type email struct {
	s     Settings
	roots *x509.CertPool // nil: the system's
}

func (m *email) loadCAs() error {
	if m.s.CAFile == "" {
		return nil
	}
	pem, err := os.ReadFile(m.s.CAFile)
	if err != nil {
		return fmt.Errorf("ca_file: %w", err)
	}
	m.roots = x509.NewCertPool()
	if !m.roots.AppendCertsFromPEM(pem) {
		return fmt.Errorf("ca_file %s holds no PEM certificate", m.s.CAFile)
	}
	return nil
}

func (m *email) Send(ctx context.Context, n state.Notification) error {
	host, _, err := net.SplitHostPort(m.s.SMTP)
	if err != nil {
		return fmt.Errorf("smtp %q: %w", m.s.SMTP, err)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", m.s.SMTP)
	if err != nil {
		return fmt.Errorf("smtp: %w", err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		conn.Close()
		return fmt.Errorf("smtp: %w", err)
	}
	defer c.Close()
	if err := c.Hello("runbook"); err != nil {
		return fmt.Errorf("smtp EHLO: %w", err)
	}
	if m.s.StartTLS {
		if ok, _ := c.Extension("STARTTLS"); !ok {
			return errors.New("smtp: the server does not offer STARTTLS (set starttls: false for a server that cannot, without a password)")
		}
		if err := c.StartTLS(&tls.Config{ServerName: host, RootCAs: m.roots, MinVersion: tls.VersionTLS12}); err != nil {
			return fmt.Errorf("smtp STARTTLS: %w", err)
		}
	}
	if m.s.Username != "" {
		if err := c.Auth(smtp.PlainAuth("", m.s.Username, m.s.Password, host)); err != nil {
			return fmt.Errorf("smtp AUTH: %w", err)
		}
	}
	from, _ := mail.ParseAddress(m.s.From)
	if err := c.Mail(from.Address); err != nil {
		return fmt.Errorf("smtp MAIL FROM: %w", err)
	}
	for _, to := range m.s.To {
		a, _ := mail.ParseAddress(to)
		if err := c.Rcpt(a.Address); err != nil {
			return fmt.Errorf("smtp RCPT TO %s: %w", a.Address, err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("smtp DATA: %w", err)
	}
	if _, err := w.Write(m.message(n)); err != nil {
		return fmt.Errorf("smtp DATA: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("smtp DATA: %w", err)
	}
	return c.Quit()
}

// message is the RFC 5322 message: its Message-ID is derived from the
// notification's key, so a message sent again after a crash has the same.
func (m *email) message(n state.Notification) []byte {
	sum := sha256.Sum256([]byte(n.Key))
	var b strings.Builder
	hdr := func(k, v string) { b.WriteString(k + ": " + v + "\r\n") }
	hdr("From", m.s.From)
	hdr("To", strings.Join(m.s.To, ", "))
	hdr("Subject", mime.QEncoding.Encode("utf-8", n.Subject))
	hdr("Date", n.CreatedAt.Format(time.RFC1123Z))
	hdr("Message-ID", "<"+hex.EncodeToString(sum[:16])+"@runbook>")
	hdr("X-Runbook-Notification", n.Key)
	hdr("MIME-Version", "1.0")
	hdr("Content-Type", `text/plain; charset="utf-8"`)
	hdr("Content-Transfer-Encoding", "8bit")
	b.WriteString("\r\n")
	for _, line := range strings.Split(n.Text, "\n") {
		b.WriteString(line + "\r\n")
	}
	return []byte(b.String())
}
