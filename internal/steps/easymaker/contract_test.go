package easymaker_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/steps"
)

// TestEveryStepTypePlansItsCallsAndNamesItsConnection checks every
// registered easymaker.* type: it has an example, shows its calls in a
// plan, takes a connection param, and a mutating create or run adopts what
// an interrupted attempt created. (The contract suite runs over every
// registered type in internal/steps/all.)
func TestEveryStepTypePlansItsCallsAndNamesItsConnection(t *testing.T) {
	var types []string
	for _, name := range steps.Names() {
		if strings.HasPrefix(name, "easymaker.") {
			types = append(types, name)
		}
	}
	require.NotEmpty(t, types)
	for _, typ := range types {
		t.Run(typ, func(t *testing.T) {
			d := desc(t, typ)
			require.NotNil(t, d.Example, "%s has an example", typ)
			assert.NotNil(t, d.Plan, "%s shows its calls in a plan", typ)
			if d.Mutating && (strings.HasSuffix(typ, ".create") || strings.HasSuffix(typ, ".run") || strings.HasSuffix(typ, "create_stage") || strings.HasSuffix(typ, "create_from_uri")) {
				assert.NotNil(t, d.Reconcile, "%s adopts what an interrupted attempt created", typ)
			}
			assert.Contains(t, d.ParamNames(), "connection")
		})
	}
}

func planOf(t *testing.T, typ string, w map[string]any) string {
	t.Helper()
	d := desc(t, typ)
	p, _, problems := d.Decode(w)
	require.Empty(t, problems)
	b, err := json.Marshal(d.Plan(p))
	require.NoError(t, err)
	return string(b)
}

func TestPlansShowTheCallsWithTheResolvedNames(t *testing.T) {
	assert.JSONEq(t, `[
	  {"method":"GET","path":"/v1.0/appkeys/{appkey}/images","note":"resolves image \"Ubuntu 22.04 CPU TensorFlow Training\" to its ID"},
	  {"method":"GET","path":"/v1.0/appkeys/{appkey}/flavors","note":"resolves instance type \"c2.c4m8\" to its ID"},
	  {"method":"GET","path":"/v1.0/appkeys/{appkey}/algorithms","note":"resolves algorithm \"Image Classification\" to its ID"},
	  {"method":"POST","path":"/v1.0/appkeys/{appkey}/trainings","body":{
	    "experimentId":"exp-1","trainingName":"t","imageId":"{id of image Ubuntu 22.04 CPU TensorFlow Training}",
	    "flavorId":"{id of instance type c2.c4m8}","algorithmId":"{id of algorithm Image Classification}",
	    "distributedNodeCount":1,"modelUploadUri":"`+obsPrefix+`/models/t","timeoutHours":720,
	    "hyperparameterList":[{"hyperparameterKey":"epochs","hyperparameterValue":"10"}]},
	   "note":"then re-reads it every 1s until COMPLETE (timeout 2m)"}
	]`, planOf(t, "easymaker.training.run", trainingOK))

	tuning := planOf(t, "easymaker.tuning.run", tuningOK)
	for _, want := range []string{`"path":"/v1.0/appkeys/{appkey}/hyperparameter-tunings"`, `"tuningStrategyName":"BAYESIAN_OPTIMIZATION"`,
		`"earlyStoppingAlgorithm":"MEDIAN"`, `"earlyStoppingMinTrialCount":3`, `"earlyStoppingStartStep":4`, `"parallelTrialCount":2`,
		`"metricRegex":`, `"objectiveMetricName":"val_loss"`} {
		assert.Contains(t, tuning, want)
	}
	assert.JSONEq(t, `[
	  {"method":"GET","path":"/v1.0/appkeys/{appkey}/experiments","note":"looks for an experiment named e (adopted if it exists)"},
	  {"method":"POST","path":"/v1.0/appkeys/{appkey}/experiments","body":{"experimentName":"e"},"note":"then re-reads it every 10s until ACTIVE (timeout 24h)"}
	]`, planOf(t, "easymaker.experiment.create", experimentOK))
	assert.JSONEq(t, `[{"method":"DELETE","path":"/v1.0/appkeys/{appkey}/endpoint-stages/stg-1"}]`,
		planOf(t, "easymaker.endpoint.delete_stage", map[string]any{"stage_id": "stg-1"}))
	assert.Contains(t, planOf(t, "easymaker.endpoint.create", with(endpointOK, map[string]any{"wait": false})), "returns the ID at once (wait: false)")
	assert.JSONEq(t, `[{"method":"GET","path":"/v1.0/appkeys/{appkey}/hyperparameter-tunings?experimentId=exp-1"}]`,
		planOf(t, "easymaker.list", map[string]any{"what": "tunings", "experiment_id": "exp-1"}))
}

func TestTheSDKDefaultsApply(t *testing.T) {
	d := desc(t, "easymaker.tuning.run")
	p, _, problems := d.Decode(with(tuningOK, map[string]any{"parallel_trial_count": nil, "poll_interval": nil, "timeout": nil}))
	require.Empty(t, problems)
	b, err := json.Marshal(p)
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(b, &got))
	assert.Equal(t, map[string]any{"distributed_node_count": 1.0, "parallel_trial_count": 1.0, "timeout_hours": 720.0,
		"early_stopping_min_trial_count": 3.0, "early_stopping_start_step": 4.0, "wait": true, "poll_interval": "10s", "timeout": "24h", "connection": "easymaker"},
		pick(got, "distributed_node_count", "parallel_trial_count", "timeout_hours", "early_stopping_min_trial_count", "early_stopping_start_step", "wait", "poll_interval", "timeout", "connection"))
}

func pick(m map[string]any, keys ...string) map[string]any {
	out := map[string]any{}
	for _, k := range keys {
		out[k] = m[k]
	}
	return out
}
