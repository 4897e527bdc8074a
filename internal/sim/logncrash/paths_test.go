package logncrash_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/sim"
	simlnc "github.com/runbook/runbook/internal/sim/logncrash"
)

func TestTheCollectorAcceptsItsPathWithATrailingSlash(t *testing.T) {
	srv, err := sim.Start(context.Background(), sim.Options{Services: []string{"logncrash"}})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	svc := srv.Service("logncrash").(*simlnc.Service)
	body := `{"projectName":"` + svc.AppKey() + `","projectVersion":"1.0.0","logVersion":"v2","body":"hi","logLevel":"INFO"}`
	resp, err := http.Post(srv.URL("logncrash")+"/v2/log/", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	assert.Len(t, svc.Logs(), 1)
}
