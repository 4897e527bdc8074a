package nks

import (
	"context"
	"time"

	"github.com/runbook/runbook/internal/cloud/nks"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

// preflightTimeout bounds the one GET /v1/supports of a preflight.
const preflightTimeout = 15 * time.Second

// versionPreflight checks a literal version against /v1/supports before
// the run starts, so an unsupported version is reported at its position in
// the playbook like any other load-time error. top is the param holding
// the version (checked only when literal); get reads the connection name
// and the version from the decoded params. An unreachable service is not a
// finding: the step checks again before its call.
func versionPreflight(top, path string, get func(params any) (connection, version string)) steps.PreflightFunc {
	return func(ctx context.Context, host steps.Host, params any, dynamic map[string]bool) []fault.Problem {
		if params == nil || dynamic[top] || dynamic["connection"] {
			return nil
		}
		connection, version := get(params)
		if version == "" {
			return nil
		}
		cl, err := clientFor(&steps.Call{Host: host}, connection)
		if err != nil {
			return nil
		}
		ctx, cancel := context.WithTimeout(ctx, preflightTimeout)
		defer cancel()
		sup, err := cl.Supports(ctx)
		if err != nil {
			return nil
		}
		if err := nks.CheckSupportedVersion(version, sup.SupportedK8s); err != nil {
			return []fault.Problem{{Path: path, Message: err.Error()}}
		}
		return nil
	}
}

var (
	preflightClusterCreate = versionPreflight("labels", "labels.kube_tag", func(params any) (string, string) {
		p := params.(*createClusterParams)
		return p.Connection, p.Labels.KubeTag
	})
	preflightNodeGroupUpgrade = versionPreflight("version", "version", func(params any) (string, string) {
		p := params.(*upgradeGroupParams)
		return p.Connection, p.Version
	})
	preflightClusterUpgrade = versionPreflight("version", "version", func(params any) (string, string) {
		p := params.(*clusterUpgradeParams)
		return p.Connection, p.Version
	})
)
