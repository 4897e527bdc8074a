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
// and the version from the params. An unreachable service is not a
// finding: the step checks again before its call.
func versionPreflight[P any](top, path string, get func(p *P) (connection, version string)) func(context.Context, steps.Host, *P, map[string]bool) []fault.Problem {
	return func(ctx context.Context, host steps.Host, p *P, dynamic map[string]bool) []fault.Problem {
		if dynamic[top] || dynamic["connection"] {
			return nil
		}
		connection, version := get(p)
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
	preflightClusterCreate = versionPreflight("labels", "labels.kube_tag", func(p *createClusterParams) (string, string) {
		return p.Connection, p.Labels.KubeTag
	})
	preflightNodeGroupUpgrade = versionPreflight("version", "version", func(p *upgradeGroupParams) (string, string) {
		return p.Connection, p.Version
	})
	preflightClusterUpgrade = versionPreflight("version", "version", func(p *clusterUpgradeParams) (string, string) {
		return p.Connection, p.Version
	})
)
