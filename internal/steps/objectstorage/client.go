package objectstorage

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/runbook/runbook/internal/cloud/objectstorage"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

// connParams names the connection.
type connParams struct {
	Connection string `json:"connection" default:"objectstorage" pattern:"^[A-Za-z][A-Za-z0-9_-]*$" desc:"name of the object storage connection (base_url, identity_url, tenant_id, username, password or token)"`
}

// clientFor builds a client from the named connection.
func clientFor(c *steps.Call, connection string) (*objectstorage.Client, error) {
	conn, err := c.Host.Connection(connection)
	if err != nil {
		return nil, err
	}
	cfg, err := objectstorage.ConfigFrom(conn)
	if err != nil {
		return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("connection %q", connection), Err: err}
	}
	cl, err := objectstorage.New(cfg)
	if err != nil {
		return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("connection %q", connection), Err: err}
	}
	return cl, nil
}

// checkURI reports a problem with an obs:// URI.
func checkURI(param, uri string) []fault.Problem {
	if _, err := objectstorage.Parse(uri); err != nil {
		return []fault.Problem{{Path: param, Message: err.Error()}}
	}
	return nil
}

// localPath refuses a path that leaves the playbook directory.
func localPath(param, p string) error {
	if p == "" || !filepath.IsLocal(p) || strings.Contains(p, `\`) {
		return &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("refusing %s %q: it must be a relative path inside the playbook directory", param, p)}
	}
	return nil
}

func checkLocal(param, p string) []fault.Problem {
	if err := localPath(param, p); err != nil {
		return []fault.Problem{{Path: param, Message: "must be a relative path inside the playbook directory (no .., not absolute)"}}
	}
	return nil
}
