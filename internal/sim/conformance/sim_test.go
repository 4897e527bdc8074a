package conformance_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/sim"
	_ "github.com/runbook/runbook/internal/sim/all"
	"github.com/runbook/runbook/internal/sim/identity"
	"github.com/runbook/runbook/internal/sim/nks"
)

// start runs the identity, cluster and help-center simulators.
func start(t *testing.T) *sim.Server {
	t.Helper()
	s, err := sim.Start(context.Background(), sim.Options{
		Services: []string{"identity", "nks", "helpcenter"},
		Start:    time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC),
	})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

func nksService(s *sim.Server) *nks.Service { return s.Service("nks").(*nks.Service) }

func credentials(s *sim.Server) identity.Credentials {
	return s.Service("identity").(*identity.Service).Store().Credentials()
}

// Values of a valid cluster create in the simulator's default world.
const (
	flavorID     = "1c5b8e4b-4a57-4d51-9c6f-2b9b3f6a7a01"
	imageID      = "6f6b9a7e-2a3c-4d8b-9c41-0e5b1f0f6a11"
	fixedNetwork = "a1b2c3d4-0000-4000-8000-000000000001"
	fixedSubnet  = "a1b2c3d4-0000-4000-8000-000000000002"
)

func clusterLabels() map[string]string {
	return map[string]string{
		"availability_zone": "kr-pub-a", "node_image": imageID,
		"boot_volume_type": "General HDD", "boot_volume_size": "50", "cert_manager_api": "True",
		"ca_enable": "False", "kube_tag": "v1.29.3", "master_lb_floating_ip_enabled": "True",
	}
}
