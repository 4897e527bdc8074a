package benche2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runbook/runbook/tools/internal/serveproc"
)

// The secret values the replicas resolve: the API token and the webhook
// signature of both routes.
const (
	apiToken = "bench-token"
	secret   = "bench-signature"
)

// The playbooks every replica serves. log and dispatch start a run per
// hook of a delivery to their route, and so does the shipped
// sms-unsubscribe (route sms); failover and agent (agents.go) are started
// through the API.
const (
	logPlaybook = `version: 1
name: bench-log
inputs:
  number: {type: string}
triggers:
  - webhook: {route: log, event: UNSUBSCRIBE, each: hook}
    inputs:
      number: ${{ trigger.hook.recipientNo }}
steps:
  - id: note
    uses: log
    with: {message: "unsubscribed ${{ inputs.number }}"}
`
	// dispatchPlaybook's steps call the harness's receiver (%[1]s: its
	// URL), which notes when each call arrives.
	dispatchPlaybook = `version: 1
name: bench-dispatch
triggers:
  - webhook: {route: dispatch, event: UNSUBSCRIBE, each: hook}
steps:
  - id: a
    uses: http.request
    with: {method: POST, url: "%[1]s/a/${{ run.id }}"}
  - id: b
    uses: http.request
    with: {method: POST, url: "%[1]s/b/${{ run.id }}"}
`
	failoverPlaybook = `version: 1
name: bench-failover
steps:
  - id: wait
    uses: shell
    with: {command: "sleep 2"}
  - id: done
    uses: log
    with: {message: done}
`
)

// Build compiles the runbook binary into dir.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "runbook")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/runbook/runbook/cmd/runbook")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build runbook: %w", err)
	}
	return bin, nil
}

// shippedPlaybook reads the repository's playbooks/name, found from the
// module's go.mod.
func shippedPlaybook(name string) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("find the module: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("find the module: run from the repository")
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(gomod), "playbooks", name))
	return string(b), err
}

// Cluster is one or more `runbook serve` processes on one state, and the
// receiver of the dispatch playbook's calls.
type Cluster struct {
	Replicas []*serveproc.Server
	client   *http.Client
	db       *pgx.Conn // the PostgreSQL state, nil on bbolt
	calls    *receiver

	postmaster int   // the PostgreSQL server's process (cpu.go), 0: none or elsewhere
	pmErr      error // why postmaster is 0 on PostgreSQL
}

// StartCluster writes the config and playbooks into dir and starts n
// replicas of bin on state (empty: a bbolt file in dir; n must be 1) with
// server.lease lease.
func StartCluster(bin, dir, state string, n int, lease time.Duration) (*Cluster, error) {
	if state == "" && n != 1 {
		return nil, fmt.Errorf("a bbolt file has one replica, not %d", n)
	}
	calls, err := newReceiver()
	if err != nil {
		return nil, err
	}
	pbDir := filepath.Join(dir, "playbooks")
	if err := os.MkdirAll(pbDir, 0o755); err != nil {
		return nil, err
	}
	sms, err := shippedPlaybook("sms-unsubscribe.yaml")
	if err != nil {
		calls.close()
		return nil, err
	}
	for name, src := range map[string]string{"log": logPlaybook, "dispatch": fmt.Sprintf(dispatchPlaybook, calls.URL), "failover": failoverPlaybook,
		"agent": fmt.Sprintf(agentPlaybook, filepath.Join(dir, "marks")), "sms-unsubscribe": sms} {
		if err := os.WriteFile(filepath.Join(pbDir, name+".yaml"), []byte(src), 0o644); err != nil {
			return nil, err
		}
	}
	config := fmt.Sprintf(`playbooks: playbooks
state: state.db
server:
  listen: 127.0.0.1:0
  token_secret: BENCH_API_TOKEN
  lease: %s
  reload: false
webhooks:
  routes:
    log: {secret: BENCH_HOOK_SECRET}
    dispatch: {secret: BENCH_HOOK_SECRET}
    sms: {secret: BENCH_HOOK_SECRET}
schedules: false
`, lease)
	if err := os.WriteFile(filepath.Join(dir, "runbook.yaml"), []byte(config), 0o644); err != nil {
		return nil, err
	}
	env := append(os.Environ(), "BENCH_API_TOKEN="+apiToken, "BENCH_HOOK_SECRET="+secret, "HOME="+dir, "XDG_STATE_HOME="+dir,
		"SMS_SUPPRESSION_FILE="+filepath.Join(dir, "suppression.txt"), "RUNBOOK_FILE_ROOTS="+dir)
	args := []string{"--config", filepath.Join(dir, "runbook.yaml")}
	if state != "" {
		args = append(args, "--state", state)
	}
	c := &Cluster{client: &http.Client{Timeout: 10 * time.Second}, calls: calls}
	if state != "" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		db, err := pgx.Connect(ctx, state)
		if err != nil {
			calls.close()
			return nil, err
		}
		c.db = db
		c.findPostmaster(ctx)
	}
	for range n {
		s, err := serveproc.Start(bin, dir, args, env, os.Stderr, time.Minute)
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.Replicas = append(c.Replicas, s)
	}
	return c, nil
}

// Stop stops every replica still running.
func (c *Cluster) Stop() {
	for _, s := range c.Replicas {
		if s.Cmd.ProcessState == nil {
			s.Stop()
		}
	}
	if c.db != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.db.Close(ctx)
	}
	c.calls.close()
}

// kill ends replica i with SIGKILL and returns when it was sent.
func (c *Cluster) kill(i int) (time.Time, error) {
	s := c.Replicas[i]
	at := time.Now()
	if err := s.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return at, err
	}
	_ = s.Cmd.Wait()
	return at, nil
}

// get decodes the JSON answer of an API path of replica i into v.
func (c *Cluster) get(ctx context.Context, i int, path string, v any) error {
	return c.call(ctx, http.MethodGet, c.Replicas[i].URL+path, nil, v)
}

func (c *Cluster) call(ctx context.Context, method, url string, body io.Reader, v any) error {
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+apiToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, strings.TrimSpace(string(b)))
	}
	if v == nil {
		return nil
	}
	return json.Unmarshal(b, v)
}

var runCounts = regexp.MustCompile(`(?m)^runbook_runs\{status="([a-z]+)"\} ([0-9.e+]+)$`)

// finalStatuses are the statuses a run ends with.
var finalStatuses = []string{"succeeded", "failed", "cancelled", "skipped"}

// finished is how many runs have a final status.
func (c *Cluster) finished(ctx context.Context) (int, error) {
	return c.runsIn(ctx, finalStatuses...)
}

// Failed is how many runs failed.
func (c *Cluster) Failed(ctx context.Context) (int, error) {
	return c.runsIn(ctx, "failed")
}

// runsIn is how many runs have one of statuses: in the database, or on
// bbolt from the one replica's runbook_runs. (On replicas runbook_runs
// counts the runs created through the one answering, and keeps pending
// one that another replica claimed and finished.)
func (c *Cluster) runsIn(ctx context.Context, statuses ...string) (int, error) {
	if c.db != nil {
		var n int
		err := c.db.QueryRow(ctx, `SELECT count(*) FROM runbook_runs WHERE status = ANY($1)`, statuses).Scan(&n)
		return n, err
	}
	total := 0
	for _, s := range c.Replicas {
		if s.Cmd.ProcessState != nil {
			continue
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/metrics", nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer "+apiToken)
		resp, err := c.client.Do(req)
		if err != nil {
			return 0, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return 0, err
		}
		for _, m := range runCounts.FindAllStringSubmatch(string(body), -1) {
			if slices.Contains(statuses, m[1]) {
				f, _ := strconv.ParseFloat(m[2], 64)
				total += int(f)
			}
		}
	}
	return total, nil
}

// waitFinished waits until want runs more than before have finished, or
// the deadline of ctx.
func (c *Cluster) waitFinished(ctx context.Context, before, want int) error {
	for {
		n, err := c.finished(ctx)
		if err == nil && n-before >= want {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d runs finished before the deadline: %w", n-before, want, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
