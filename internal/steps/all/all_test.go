package all_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/runbook/runbook/internal/steps"
	_ "github.com/runbook/runbook/internal/steps/all"
	"github.com/runbook/runbook/internal/steps/stepstest"
)

func TestEveryBuiltInIsDocumentedAndHasAValidSchema(t *testing.T) {
	all := steps.All()
	assert.Subset(t, steps.Names(), []string{"approval", "fail", "http.request", "log", "playbook", "set", "shell", "sleep"})
	for _, d := range all {
		t.Run(d.Type, func(t *testing.T) {
			assert.NotEmpty(t, d.Summary, "summary")
			for _, o := range d.Outputs {
				assert.NotEmpty(t, o.Description, "output %s", o.Name)
			}
			stepstest.CompileSchema(t, d.ParamsSchema())
			stepstest.CompileSchema(t, d.OutputsSchema())
		})
	}
}
