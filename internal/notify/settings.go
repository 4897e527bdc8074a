package notify

import (
	"fmt"

	"github.com/runbook/runbook/internal/config"
)

// ConnectionPrefix names a channel as a connection: the notify step reads
// channel NAME's settings through its host's connection "notify:NAME".
const ConnectionPrefix = "notify:"

// Settings are channel ch's settings with its secrets resolved, as the
// notify step reads them (FromSettings).
func Settings(ch config.Channel, lookup Lookup) (map[string]any, error) {
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
	s := map[string]any{"kind": ch.Kind, "url": ch.URL, "smtp": ch.SMTP, "from": ch.From, "username": ch.Username,
		"starttls": ch.StartTLS, "ca_file": ch.CAFile}
	to := make([]any, len(ch.To))
	for i, a := range ch.To {
		to[i] = a
	}
	s["to"] = to
	for key, name := range map[string]string{"url_value": ch.URLSecret, "signing_secret": ch.Secret, "password": ch.PasswordSecret} {
		v, err := get(name)
		if err != nil {
			return nil, err
		}
		if v != "" {
			s[key] = v
		}
	}
	if v, ok := s["url_value"].(string); ok {
		s["url"] = v
		delete(s, "url_value")
	}
	return s, nil
}

// FromSettings builds the channel whose Settings s are.
func FromSettings(name string, s map[string]any) (Channel, error) {
	str := func(k string) string { v, _ := s[k].(string); return v }
	ch := config.Channel{Name: name, Kind: str("kind"), URL: str("url"), SMTP: str("smtp"), From: str("from"),
		Username: str("username"), CAFile: str("ca_file"), StartTLS: s["starttls"] != false}
	if ch.Kind == "" {
		return nil, fmt.Errorf("channel %s has no kind", name)
	}
	if l, ok := s["to"].([]any); ok {
		for _, a := range l {
			if a, ok := a.(string); ok {
				ch.To = append(ch.To, a)
			}
		}
	}
	if str("signing_secret") != "" {
		ch.Secret = "signing_secret"
	}
	if str("password") != "" {
		ch.PasswordSecret = "password"
	}
	return NewChannel(ch, func(k string) (string, bool) { v := str(k); return v, v != "" })
}
