package steps_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

type testAuth struct {
	Username string `json:"username" required:"true"`
	Password string `json:"password"`
}

type testItem struct {
	Name string `json:"name" required:"true" maxlen:"5"`
	Size int    `json:"size" min:"1"`
}

type testParams struct {
	NodeCount int               `json:"node_count" required:"true" min:"1" max:"10" desc:"number of nodes"`
	Method    string            `json:"method,omitempty" enum:"GET,POST" default:"GET"`
	Name      string            `json:"name" maxlen:"50"`
	Version   string            `json:"version" pattern:"^v\\d+$"`
	Timeout   steps.Duration    `json:"timeout" default:"30s" max:"720h"`
	Ratio     float64           `json:"ratio" min:"0" max:"1"`
	Labels    []string          `json:"labels" maxlen:"3" pattern:"^[a-z]+$"`
	Headers   map[string]string `json:"headers"`
	Items     []testItem        `json:"items"`
	Auth      *testAuth         `json:"auth"`
	JSON      any               `json:"json"`
	Limit     *int              `json:"limit"`
	Codes     []int             `json:"codes" default:"0,2"`
	CIDR      string            `json:"cidr" format:"cidr"`
	URL       string            `json:"url" format:"uri"`
	Flag      bool              `json:"flag" default:"true"`
	Big       int64             `json:"big"`
	Level     int               `json:"level" enum:"1,2,3"`
	Semver    string            `json:"semver" format:"semver"`
	Wait      string            `json:"wait" format:"duration"`
}

var seq atomic.Int64

// register registers d under a fresh test type name and returns the stored
// descriptor.
func register(t *testing.T, d steps.Descriptor) *steps.Descriptor {
	t.Helper()
	d.Type = fmt.Sprintf("test.params%d", seq.Add(1))
	if d.Run == nil {
		d.Run = func(context.Context, *steps.Call) (steps.Outputs, error) { return nil, nil }
	}
	steps.Register(d)
	got, ok := steps.Lookup(d.Type)
	require.True(t, ok)
	return got
}

func messages(ps []fault.Problem) []string {
	if len(ps) == 0 {
		return nil
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Error()
	}
	return out
}

func TestParamNames(t *testing.T) {
	type embedded struct {
		Region string `json:"region"`
	}
	type p struct {
		embedded
		Name string `json:"name"`
		Skip string `json:"-"`
		priv string
	}
	d := register(t, steps.Descriptor{Params: p{}})
	assert.Equal(t, []string{"region", "name"}, d.ParamNames())
	pp, _, problems := d.Decode(map[string]any{"region": "kr1", "name": "n"})
	require.Empty(t, problems)
	assert.Equal(t, "kr1", pp.(*p).Region, "embedded struct fields are flattened")
}
