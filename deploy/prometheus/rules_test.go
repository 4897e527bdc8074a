// Package prometheus holds the tests of runbook's Prometheus alert rules
// (alerts.yaml): their unit tests (alerts_test.yaml) run by Debian's
// promtool, and a check that every series they read exists on a fresh
// runbook serve.
package prometheus

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

func need(t *testing.T, ok bool, what string) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: this test may not skip)", what)
	}
	t.Skip(what)
}

func promtool(t *testing.T, args ...string) string {
	t.Helper()
	return promtoolIn(t, "", args...)
}

// promtoolIn runs promtool with stdin as its input.
func promtoolIn(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	_, err := exec.LookPath("promtool")
	need(t, err == nil, "promtool is missing (Debian's prometheus package)")
	cmd := exec.Command("promtool", args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

// The shipped rules are valid and behave as alerts_test.yaml says: each
// alert fires when it should, with its labels and text, and not before.
func TestTheAlertRulesPassTheirUnitTests(t *testing.T) {
	assert.Contains(t, promtool(t, "check", "rules", "alerts.yaml"), "SUCCESS: 5 rules found")
	out := promtool(t, "test", "rules", "alerts_test.yaml")
	assert.Contains(t, out, "SUCCESS")
	t.Logf("promtool test rules alerts_test.yaml:\n%s", out)
}

// ruleFile is the part of a rule file this test reads.
type ruleFile struct {
	Groups []struct {
		Rules []struct {
			Alert string `json:"alert"`
			Expr  string `json:"expr"`
		} `json:"rules"`
	} `json:"groups"`
}

// seriesName is a runbook metric name in a rule's expression.
var seriesName = regexp.MustCompile(`\brunbook_[a-z0-9_]+\b`)

// ruleSeries returns the runbook series each alert of alerts.yaml reads.
func ruleSeries(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("alerts.yaml")
	require.NoError(t, err)
	var f ruleFile
	require.NoError(t, yaml.Unmarshal(b, &f))
	out := map[string][]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			for _, name := range seriesName.FindAllString(r.Expr, -1) {
				if !slices.Contains(out[r.Alert], name) {
					out[r.Alert] = append(out[r.Alert], name)
				}
			}
		}
	}
	return out
}

// Every series the rules read is on a runbook serve that just started,
// before any run, firing or delivery: a rule's increase() sees the first
// failure, and a rule never silently watches an absent series. (`up` is
// Prometheus's own.)
func TestTheSeriesTheRulesUseExistOnAFreshServe(t *testing.T) {
	want := ruleSeries(t)
	require.Len(t, want, 4, "every alert but RunbookReplicaDown, which reads up only")

	url := serve(t)
	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	have := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		have[line[:strings.IndexAny(line, "{ ")]] = true
	}
	for alert, names := range want {
		for _, name := range names {
			assert.True(t, have[name], "%s reads %s, which a fresh serve does not export", alert, name)
		}
	}
}

// Prometheus reads a serve's /metrics, the runtime's, the process's and
// runbook's families with the series a finished run and a delivery add:
// promtool checks the text as a scrape (and lints it).
func TestPrometheusReadsAServesMetrics(t *testing.T) {
	url := serve(t)
	call := func(method, path, body string, header map[string]string) []byte {
		req, err := http.NewRequest(method, url+path, strings.NewReader(body))
		require.NoError(t, err)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Less(t, resp.StatusCode, 300, "%s %s: %s", method, path, b)
		return b
	}
	auth := map[string]string{"Authorization": "Bearer test-token-1234", "Content-Type": "application/json"}
	call("POST", "/api/v1/playbooks/nightly/runs", `{}`, auth)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(string(call("GET", "/metrics", "", nil)), `runbook_step_duration_seconds_count{outcome="succeeded"`) {
		require.True(t, time.Now().Before(deadline), "the run's step was not counted within 30 s")
		time.Sleep(50 * time.Millisecond)
	}
	text := call("GET", "/metrics", "", nil)
	out := promtoolIn(t, string(text), "check", "metrics")
	t.Logf("promtool check metrics: %s", out)
	for _, family := range []string{"go_gc_duration_seconds summary", "go_memstats_heap_inuse_bytes gauge", "process_cpu_seconds_total counter",
		"runbook_step_duration_seconds histogram", "runbook_runs_finished_total counter"} {
		assert.Contains(t, string(text), "# TYPE "+family+"\n")
	}
}

// listening is the line runbook serve prints once it serves.
var listening = regexp.MustCompile(`listening on (http://[0-9.:]+)`)

// serve builds runbook and starts `runbook serve` on a fresh state file
// with a scheduled playbook that also takes webhooks, and a route; it
// returns the server's URL once it listens.
func serve(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "runbook")
	// The release flags (Makefile), as the chart test builds it: the
	// packages are reused from the build cache.
	build := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-o", bin, "./cmd/runbook")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Dir = "../.."
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	pbDir := filepath.Join(dir, "playbooks")
	require.NoError(t, os.Mkdir(pbDir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(pbDir, "nightly.yaml"), []byte(`version: 1
name: nightly
triggers:
  - schedule: {cron: "0 3 * * *"}
  - webhook: {route: sms}
steps:
  - {id: a, uses: log, with: {message: hi}}
`), 0o644))
	cfg := "playbooks: " + pbDir + "\nstate: " + filepath.Join(dir, "state.db") + "\nwebhooks:\n  routes:\n    sms: {secret: SMS_SECRET}\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "runbook.yaml"), []byte(cfg), 0o644))

	cmd := exec.Command(bin, "serve", "--config", filepath.Join(dir, "runbook.yaml"), "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "HOME="+dir, "RUNBOOK_API_TOKEN=test-token-1234", "SMS_SECRET=hook-secret")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr := &lockedBuilder{b: &strings.Builder{}}
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case url := <-found:
		return url
	case <-time.After(30 * time.Second):
		t.Fatalf("runbook serve did not listen within 30 s:\n%s", stderr.String())
	}
	return ""
}

// lockedBuilder is a strings.Builder the process's output goroutine and
// the test can share.
type lockedBuilder struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
