package nks

import (
	"github.com/runbook/runbook/internal/cloud/identity"
	"github.com/runbook/runbook/internal/cloud/nks"
	"github.com/runbook/runbook/internal/steps"
)

// defaultConnection is the connection cluster steps use unless told.
const defaultConnection = "nks"

// clientFor builds the cluster API client for the step's connection (name
// from the step's `connection` param, default "nks"): a token source (a
// static token, or identity credentials exchanged for a cached token) and
// the region's or the configured base URL.
func clientFor(c *steps.Call, connection string) (*nks.Client, error) {
	if connection == "" {
		connection = defaultConnection
	}
	conn, err := c.Host.Connection(connection)
	if err != nil {
		return nil, err
	}
	tokens, err := identity.SourceFrom(conn)
	if err != nil {
		return nil, err
	}
	cfg, err := nks.ConfigFrom(conn, tokens)
	if err != nil {
		return nil, err
	}
	return nks.New(cfg)
}
