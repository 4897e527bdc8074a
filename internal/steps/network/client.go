package network

import (
	"context"
	"errors"
	"net/url"
	"strings"

	"github.com/runbook/runbook/internal/cloud/identity"
	"github.com/runbook/runbook/internal/cloud/network"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

// defaultConnection is the connection the steps use unless told: the
// cluster connection, whose credentials the network and image APIs accept
// and which carries network_url and image_url.
const defaultConnection = "nks"

type connParam struct {
	Connection string `json:"connection" default:"nks" minlen:"1" desc:"name of the connection whose credentials, region, network_url and image_url are used (the cluster connection)"`
}

// read builds the client for the step's connection and runs f with it,
// converting the client's errors to step errors.
func read(ctx context.Context, c *steps.Call, connection string, f func(cl *network.Client) (steps.Outputs, error)) (steps.Outputs, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cl, err := clientFor(c, connection)
	if err != nil {
		return nil, stepErr(err)
	}
	out, err := f(cl)
	return out, stepErr(err)
}

// clientFor builds the client: a token source (a static token, or identity
// credentials exchanged for a cached token) and the base URLs.
func clientFor(c *steps.Call, connection string) (*network.Client, error) {
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
	cfg, err := network.ConfigFrom(conn, tokens)
	if err != nil {
		return nil, err
	}
	return network.New(cfg)
}

// stepErr converts a client error to a *fault.Error with the code its
// Class names. Other errors (a token source's *fault.Error, a context
// error, a step's own) pass unchanged.
func stepErr(err error) error {
	var ne *network.Error
	var se *fault.Error
	if err == nil || !errors.As(err, &ne) || (errors.As(err, &se) && se.Code != "") {
		return err
	}
	out := &fault.Error{Code: fault.Code(ne.Class), Err: err}
	if ne.Status != 0 {
		out.Data = map[string]any{"http_status": ne.Status, "type": ne.Type, "message": ne.Message}
	}
	return out
}

// planPath keeps the "<from ...>" placeholders of `runbook plan` readable
// in a query the client escaped.
func planPath(path string, values ...string) string {
	for _, v := range values {
		if strings.HasPrefix(v, "<") {
			path = strings.ReplaceAll(path, url.QueryEscape(v), v)
		}
	}
	return path
}

func strList(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
