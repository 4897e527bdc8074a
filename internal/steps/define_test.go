package steps_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/runbook/runbook/internal/steps"
)

func runNone(context.Context, *steps.Call, *steps.None) (steps.Outputs, error) { return nil, nil }

func TestTheDefiningPackageIsRecorded(t *testing.T) {
	const here = "github.com/runbook/runbook/internal/steps_test"
	t.Run("a step without params belongs to the package of its Run, not to the adapter's", func(t *testing.T) {
		d := steps.Define(steps.Def[steps.None]{Type: "test.none", Run: runNone})
		assert.Equal(t, here, d.Package)
	})
	t.Run("a step with params belongs to the package of its params type", func(t *testing.T) {
		d := steps.Define(steps.Def[testAuth]{Type: "test.auth"})
		assert.Equal(t, here, d.Package)
	})
	t.Run("Register fills it for a Descriptor without one", func(t *testing.T) {
		d := register(t, steps.Descriptor{})
		assert.Equal(t, here, d.Package)
	})
	t.Run("Register keeps a package that is given", func(t *testing.T) {
		d := register(t, steps.Descriptor{Package: "example.com/family"})
		assert.Equal(t, "example.com/family", d.Package)
	})
}
