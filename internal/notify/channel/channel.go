// Package channel sends a notification to one destination: a
// Slack-compatible incoming webhook, a POST signed as Standard Webhooks, or
// e-mail over SMTP. It knows the settings of a channel with its secrets
// resolved (Settings), not the config they come from, so that the notify
// step uses it without the config.
package channel

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// The kinds of channel.
const (
	Slack   = "slack"   // a Slack-compatible incoming webhook: {text, blocks}
	Webhook = "webhook" // a JSON POST signed with Standard Webhooks headers
	Email   = "email"   // SMTP, STARTTLS, AUTH PLAIN
)

// Channel sends one message to one destination. An error means the
// message was not taken (it is tried again); Send may be called again
// with the same message after an error or a crash, with the same Key.
type Channel interface {
	Send(ctx context.Context, n state.Notification) error
}

// Settings are a channel's settings with its secrets resolved: URL for
// slack and webhook, SigningSecret (whsec_) for webhook; SMTP, From, To,
// Username, Password, StartTLS and CAFile for email.
type Settings struct {
	Kind          string   `json:"kind"`
	URL           string   `json:"url,omitempty"`
	SigningSecret string   `json:"signing_secret,omitempty"`
	SMTP          string   `json:"smtp,omitempty"`
	From          string   `json:"from,omitempty"`
	To            []string `json:"to,omitempty"`
	Username      string   `json:"username,omitempty"`
	Password      string   `json:"password,omitempty"`
	StartTLS      bool     `json:"starttls"`
	CAFile        string   `json:"ca_file,omitempty"`
}

// New builds the channel of s.
func New(s Settings) (Channel, error) {
	switch s.Kind {
	case Slack:
		return &slack{url: s.URL, client: httpClient()}, nil
	case Webhook:
		key, err := signingKey(s.SigningSecret)
		if err != nil {
			return nil, err
		}
		return &webhook{url: s.URL, key: key, client: httpClient(), now: time.Now}, nil
	case Email:
		m := &email{s: s}
		if err := m.loadCAs(); err != nil {
			return nil, err
		}
		return m, nil
	}
	return nil, fmt.Errorf("unknown kind %q", s.Kind)
}

// ConnectionPrefix names a channel as a connection: the notify step reads
// channel NAME's settings (Map) through its host's connection
// "notify:NAME", which runbook serve fills from its config.
const ConnectionPrefix = "notify:"

// Map is s as a connection's settings (the notify step's host gives
// them); FromMap reads them back.
func (s Settings) Map() map[string]any {
	b, _ := json.Marshal(s)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// FromMap reads Settings written by Map.
func FromMap(m map[string]any) (Settings, error) {
	var s Settings
	b, err := json.Marshal(m)
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	if err != nil || s.Kind == "" {
		return Settings{}, errors.New("not the settings of a notification channel")
	}
	return s, nil
}

// httpClient does not follow redirects: a 3xx is an answer to look at,
// not a place to send the message to.
func httpClient() *http.Client {
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// signingKey decodes a Standard Webhooks secret: whsec_ and the key in
// standard base64.
func signingKey(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, "whsec_")
	k, err := base64.StdEncoding.DecodeString(b64)
	if !ok || err != nil || len(k) < 16 {
		return nil, errors.New("a signing secret is whsec_ followed by at least 16 bytes in base64 (whsec_$(head -c 24 /dev/urandom | base64))")
	}
	return k, nil
}

// slack posts a Slack-compatible incoming webhook message.
type slack struct {
	url    string
	client *http.Client
}

func (s *slack) Send(ctx context.Context, n state.Notification) error {
	body, err := json.Marshal(map[string]any{
		"text": n.Text,
		"blocks": []any{
			map[string]any{"type": "header", "text": map[string]any{"type": "plain_text", "text": clip(n.Subject, 150)}},
			map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": clip(body(n.Text), 3000)}},
		},
	})
	if err != nil {
		return err
	}
	return post(ctx, s.client, s.url, body, nil)
}

// webhook posts the event as JSON signed with Standard Webhooks headers.
type webhook struct {
	url    string
	key    []byte
	client *http.Client
	now    func() time.Time
}

func (w *webhook) Send(ctx context.Context, n state.Notification) error {
	body, err := json.Marshal(map[string]any{
		"type": n.Event, "timestamp": n.CreatedAt.UTC().Format(time.RFC3339Nano),
		"subject": n.Subject, "text": n.Text, "data": n.Data,
	})
	if err != nil {
		return err
	}
	ts := strconv.FormatInt(w.now().Unix(), 10)
	mac := hmac.New(sha256.New, w.key)
	mac.Write([]byte(n.Key + "." + ts + "."))
	mac.Write(body)
	h := http.Header{}
	h.Set("webhook-id", n.Key)
	h.Set("webhook-timestamp", ts)
	h.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	return post(ctx, w.client, w.url, body, h)
}

// post sends body as JSON and wants a 2xx answer.
func post(ctx context.Context, c *http.Client, to string, body []byte, h http.Header) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, to, bytes.NewReader(body))
	if err != nil {
		return errors.New("the channel's URL is not a valid URL")
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "runbook-notify")
	resp, err := c.Do(req)
	if err != nil {
		return hideURL(err)
	}
	defer resp.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("the receiver answered %s: %s", resp.Status, strings.TrimSpace(string(head)))
	}
	return nil
}

// hideURL drops the URL from a client error: a Slack webhook's URL is a
// credential, and the error is kept as the message's last error.
func hideURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", strings.ToUpper(ue.Op), ue.Err)
	}
	return err
}

// body is the text without its first line (the subject).
func body(text string) string {
	if _, rest, ok := strings.Cut(text, "\n"); ok {
		return rest
	}
	return text
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	r := []rune(s)
	for len(string(r)) > n-1 {
		r = r[:len(r)-1]
	}
	return string(r) + "…"
}
