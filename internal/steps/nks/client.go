package nks

import (
	"context"
	"regexp"
	"sync"

	"github.com/runbook/runbook/internal/cloud/identity"
	"github.com/runbook/runbook/internal/cloud/nks"
	"github.com/runbook/runbook/internal/steps"
)

// defaultConnection is the connection cluster steps use unless told.
const defaultConnection = "nks"

// clientFor builds the cluster API client for the step's connection (name
// from the step's `connection` param, default "nks"): a token source (a
// static token, or identity credentials exchanged for a cached token) and
// the region's or the configured base URL. A step builds one client per
// run.
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

// read runs a read-only step with a client for conn.
func read(ctx context.Context, c *steps.Call, conn string, f func(cl *nks.Client) (steps.Outputs, error)) (steps.Outputs, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cl, err := clientFor(c, conn)
	if err != nil {
		return nil, err
	}
	return f(cl)
}

var uuidRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
})

// clusterUUID resolves a cluster name to its UUID (the task history paths
// take UUIDs only). A UUID is returned as is.
func clusterUUID(ctx context.Context, cl *nks.Client, ref string) (string, error) {
	if uuidRE().MatchString(ref) {
		return ref, nil
	}
	c, err := cl.GetCluster(ctx, ref)
	if err != nil {
		return "", err
	}
	return c.UUID, nil
}
