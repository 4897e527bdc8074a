package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// simPosts returns the paths of the POSTs a simulator service answered
// (injected faults excluded), in order.
func simPosts(t *testing.T, url, service string) []string {
	t.Helper()
	resp, err := http.Get(url + "/_sim/journal?service=" + service + "&method=POST")
	require.NoError(t, err)
	defer resp.Body.Close()
	var calls []struct {
		Path  string `json:"path"`
		Fault string `json:"fault"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&calls))
	var out []string
	for _, c := range calls {
		if c.Fault == "" {
			out = append(out, c.Path)
		}
	}
	return out
}

// mlCreates counts the create calls the ML simulator answered, by
// collection: experiments, hyperparameter-tunings, models, endpoints...
func mlCreates(t *testing.T, url string) map[string]int {
	t.Helper()
	re := regexp.MustCompile(`^/v1\.0/appkeys/[^/]+/([a-z-]+)$`)
	n := map[string]int{}
	for _, p := range simPosts(t, url, "easymaker") {
		if m := re.FindStringSubmatch(p); m != nil {
			n[m[1]]++
		}
	}
	return n
}

// mlList lists a collection through the simulator's API (the secret key
// from its connection) and returns the resources it holds.
func mlList(t *testing.T, url, collection, key string) []map[string]any {
	t.Helper()
	resp, err := http.Get(url + "/_sim/connections")
	require.NoError(t, err)
	var conns map[string]map[string]string
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&conns))
	resp.Body.Close()
	em := conns["easymaker"]
	require.NotEmpty(t, em["appkey"], "easymaker connection: %v", conns)
	req, err := http.NewRequest(http.MethodGet, em["base_url"]+"/v1.0/appkeys/"+em["appkey"]+"/"+collection+"?limit=1000", nil)
	require.NoError(t, err)
	req.Header.Set("X-Secret-Key", em["secret_key"])
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var body map[string]json.RawMessage
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	var items []map[string]any
	require.NoError(t, json.Unmarshal(body[key+"List"], &items), "%s", body)
	return items
}

// TestKilledTuningResumesWithOneOfEachResource kills the real binary with
// SIGKILL while easymaker.tuning.run waits for its tuning, resumes the run
// against the same simulator, and reads the simulator's journal and
// listings: one experiment, one tuning and one endpoint were created, and
// the resumed run finished the playbook with a prediction.
func TestKilledTuningResumesWithOneOfEachResource(t *testing.T) {
	c := newCLI(t)
	// 100x: the tuning (4 trials, 2 at a time, 3 simulated minutes each)
	// lasts about 5 s of real time, the endpoint about 1.5 s.
	url := c.startSim("--speed", "100", "--services", "identity,easymaker,objectstorage,logncrash")
	book, err := os.ReadFile(filepath.Join("..", "..", "examples", "ml-tune-and-deploy.yaml"))
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "data", "churn-train.csv"))
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "data"), 0o755))
	c.file("data/churn-train.csv", string(data))
	pb := c.file("ml.yaml", string(book))

	cmd, id := c.startUntil("step tune started", "run", "--sim-url", url, pb)
	require.NotEmpty(t, id)
	deadline := time.Now().Add(10 * time.Second)
	for mlCreates(t, url)["hyperparameter-tunings"] == 0 {
		require.True(t, time.Now().Before(deadline), "no tuning created within 10s")
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond) // a poll or two into the wait, its checkpoint written
	require.NoError(t, cmd.Process.Signal(os.Kill))
	_ = cmd.Wait()
	require.Zero(t, mlCreates(t, url)["endpoints"], "killed before the endpoint")
	tunings := mlList(t, url, "hyperparameter-tunings", "hyperparameterTuning")
	require.Len(t, tunings, 1)
	require.NotEqual(t, "COMPLETE", tunings[0]["hyperparameterTuningStatusCode"], "killed while the tuning runs")

	r := c.run("run", "--resume", id, "--sim-url", url)
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "step smoke succeeded")
	creates := mlCreates(t, url)
	assert.Equal(t, 1, creates["experiments"], "experiment creates: %v", creates)
	assert.Equal(t, 1, creates["hyperparameter-tunings"], "tuning creates: %v", creates)
	assert.Equal(t, 1, creates["endpoints"], "endpoint creates: %v", creates)
	assert.Len(t, mlList(t, url, "experiments", "experiment"), 1)
	assert.Len(t, mlList(t, url, "hyperparameter-tunings", "hyperparameterTuning"), 1)
	assert.Len(t, mlList(t, url, "endpoints", "endpoint"), 1)
}

// TestTheShippedTuneAndDeployRunsAsItIs: playbooks/ml-tune-and-deploy.yaml
// uploads its default data file (shipped beside it, as runbook serve needs
// it: inside the playbook directory), and a storage_uri the upload step
// would refuse is refused at the start, by the input's pattern, before
// anything runs.
func TestTheShippedTuneAndDeployRunsAsItIs(t *testing.T) {
	c := newCLI(t)
	pb, err := filepath.Abs(filepath.Join("..", "..", "playbooks", "ml-tune-and-deploy.yaml"))
	require.NoError(t, err)

	r := c.run("run", "--sim", pb, "-i", "storage_uri=obs://bucket/churn")
	assert.Equal(t, 2, r.code, r)
	assert.Contains(t, r.stderr, "storage_uri")
	assert.NotContains(t, r.stdout, "step upload started", "refused before anything runs")

	cmd, id := c.startUntil("step upload succeeded", "run", "--sim", pb,
		"-i", "storage_uri=obs://kr1-api-object-storage.nhncloudservice.com/v1/AUTH_demo/ml/churn")
	require.NotEmpty(t, id)
	_ = cmd.Process.Kill()
}
