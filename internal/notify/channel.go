package notify

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

	"github.com/runbook/runbook/internal/config"
	"github.com/runbook/runbook/internal/state"
)

// Channel sends one message to one destination. An error means the
// message was not taken (it is tried again); Send may be called again
// with the same message after an error or a crash, with the same Key.
type Channel interface {
	Send(ctx context.Context, n state.Notification) error
}

// Lookup resolves a secret name to its value.
type Lookup func(name string) (string, bool)

// NewChannel builds the channel ch describes, resolving its secrets.
func NewChannel(ch config.Channel, lookup Lookup) (Channel, error) {
	get := func(name string) (string, error) {
		v, ok := lookup(name)
		if !ok {
			return "", fmt.Errorf("channel %s: secret %s is not set", ch.Name, name)
		}
		return v, nil
	}
	switch ch.Kind {
	case config.ChannelSlack, config.ChannelWebhook:
		u := ch.URL
		if ch.URLSecret != "" {
			v, err := get(ch.URLSecret)
			if err != nil {
				return nil, err
			}
			u = v
		}
		if ch.Kind == config.ChannelSlack {
			return &slack{url: u, client: httpClient()}, nil
		}
		secret, err := get(ch.Secret)
		if err != nil {
			return nil, err
		}
		key, err := signingKey(secret)
		if err != nil {
			return nil, fmt.Errorf("channel %s: secret %s: %w", ch.Name, ch.Secret, err)
		}
		return &webhook{url: u, key: key, client: httpClient(), now: time.Now}, nil
	case config.ChannelEmail:
		m := &email{ch: ch}
		if ch.PasswordSecret != "" {
			v, err := get(ch.PasswordSecret)
			if err != nil {
				return nil, err
			}
			m.password = v
		}
		if err := m.loadCAs(); err != nil {
			return nil, fmt.Errorf("channel %s: %w", ch.Name, err)
		}
		return m, nil
	}
	return nil, fmt.Errorf("channel %s: unknown kind %q", ch.Name, ch.Kind)
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
