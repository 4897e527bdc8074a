package notify

import (
	"fmt"

	"github.com/runbook/runbook/internal/config"
	"github.com/runbook/runbook/internal/notify/channel"
)

// Channel sends one message to one destination (internal/notify/channel).
type Channel = channel.Channel

// Lookup resolves a secret name to its value.
type Lookup func(name string) (string, bool)

// ConnectionPrefix names a channel as a connection (channel.ConnectionPrefix).
const ConnectionPrefix = channel.ConnectionPrefix

// NewChannel builds the channel ch describes, resolving its secrets.
func NewChannel(ch config.Channel, lookup Lookup) (Channel, error) {
	s, err := Settings(ch, lookup)
	if err != nil {
		return nil, err
	}
	c, err := channel.New(s)
	switch {
	case err != nil && ch.Kind == config.ChannelWebhook:
		return nil, fmt.Errorf("channel %s: secret %s: %w", ch.Name, ch.Secret, err)
	case err != nil:
		return nil, fmt.Errorf("channel %s: %w", ch.Name, err)
	}
	return c, nil
}

// Settings are channel ch's settings with its secrets resolved.
func Settings(ch config.Channel, lookup Lookup) (channel.Settings, error) {
	get := func(name string) (string, error) {
		if name == "" {
			return "", nil
		}
		v, ok := lookup(name)
		if !ok {
			return "", fmt.Errorf("channel %s: secret %s is not set", ch.Name, name)
		}
		return v, nil
	}
	s := channel.Settings{Kind: ch.Kind, URL: ch.URL, SMTP: ch.SMTP, From: ch.From, To: ch.To, Username: ch.Username,
		StartTLS: ch.StartTLS, CAFile: ch.CAFile}
	var err error
	if ch.URLSecret != "" {
		if s.URL, err = get(ch.URLSecret); err != nil {
			return s, err
		}
	}
	if s.SigningSecret, err = get(ch.Secret); err != nil {
		return s, err
	}
	if s.Password, err = get(ch.PasswordSecret); err != nil {
		return s, err
	}
	return s, nil
}
