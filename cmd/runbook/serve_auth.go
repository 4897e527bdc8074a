package main

import (
	"github.com/runbook/runbook/internal/auth"
	"github.com/runbook/runbook/internal/config"
	"github.com/runbook/runbook/internal/server"
)

// serverAuth turns the config's auth section into the server's options.
func serverAuth(cfg *config.Config) (server.AuthOptions, error) {
	o := server.AuthOptions{Users: cfg.Auth.Users, AuditRetention: cfg.Auth.AuditRetention}
	if cfg.Auth.OIDC != nil {
		v, err := auth.NewOIDCVerifier(*cfg.Auth.OIDC)
		if err != nil {
			return o, &exitError{code: 2, err: err, hint: "runbook config check"}
		}
		o.OIDC = v
	}
	return o, nil
}
