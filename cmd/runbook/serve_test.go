package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const serveToken = "serve-test-token"

// server is a `runbook serve` process of a test.
type serveProc struct {
	cmd    *exec.Cmd
	url    string
	banner string // the line that said where it listens
	stderr *bytes.Buffer
	done   chan struct{}
}

var listeningRe = regexp.MustCompile(`listening on (http://[0-9.:]+)`)

// serve starts `runbook serve args...` on a free loopback port with the API
// token set and returns once it listens.
func (c *cli) serve(args ...string) *serveProc {
	c.t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Dir = c.dir
	cmd.Env = append(append([]string{}, c.env...), "RUNBOOK_API_TOKEN="+serveToken)
	out, err := cmd.StdoutPipe()
	require.NoError(c.t, err)
	s := &serveProc{cmd: cmd, stderr: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stderr = &lockedWriter{w: s.stderr}
	require.NoError(c.t, cmd.Start())
	go func() { _ = cmd.Wait(); close(s.done) }()
	c.t.Cleanup(func() { s.kill() })
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := listeningRe.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- sc.Text():
				default:
				}
			}
		}
	}()
	select {
	case s.banner = <-found:
		s.url = listeningRe.FindStringSubmatch(s.banner)[1]
	case <-s.done:
		c.t.Fatalf("runbook serve exited at start:\n%s", s.stderr.String())
	case <-time.After(15 * time.Second):
		c.t.Fatalf("runbook serve did not listen within 15s:\n%s", s.stderr.String())
	}
	return s
}

func (s *serveProc) kill() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
	}
	<-s.done
}

// stop sends SIGTERM and waits for a graceful exit.
func (s *serveProc) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		t.Fatal("runbook serve did not stop within 20s of SIGTERM")
	}
	assert.Equal(t, 0, s.cmd.ProcessState.ExitCode(), s.stderr.String())
}

// api calls the API and decodes the JSON answer.
func (s *serveProc) api(t *testing.T, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+serveToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var m map[string]any
	b, _ := io.ReadAll(resp.Body)
	require.NoError(t, json.Unmarshal(b, &m), "%s", b)
	return resp.StatusCode, m
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestServeRefusesInvalidPlaybooksPrintingEveryProblem(t *testing.T) {
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("playbooks/a.yaml", "version: 1\nname: a\nsteps:\n  - {id: x, uses: lgo}\n")
	c.file("playbooks/b.yaml", "version: 1\nname: b\nsteps:\n  - {id: x, uses: log, with: {mesage: hi}}\n")
	c.file("playbooks/ok.yaml", "version: 1\nname: ok\nsteps:\n  - {id: x, uses: log, with: {message: hi}}\n")
	r := c.run("serve", "--listen", "127.0.0.1:0")
	assert.Equal(t, 2, r.code, r)
	assert.Contains(t, r.stderr, "playbooks/a.yaml:4:")
	assert.Contains(t, r.stderr, `did you mean "log"`)
	assert.Contains(t, r.stderr, "playbooks/b.yaml:4:")
	assert.Contains(t, r.stderr, `did you mean "message"`)
	assert.Empty(t, r.stdout)
}

// TestServeNamesEveryMissingRouteSecretAndARehearsalLeavesTheRouteOut: a
// webhook route whose secret (or one of its secrets) is unset stops the
// start, every such route named; with --sim the server starts without it.
func TestServeNamesEveryMissingRouteSecretAndARehearsalLeavesTheRouteOut(t *testing.T) {
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("runbook.yaml", `playbooks: playbooks
webhooks:
  routes:
    sms: {secret: SMS_SECRET}
    pair: {secret: A_SECRET, secrets: [B_SECRET]}
    ok: {secret: A_SECRET}
`)
	c.env = append(c.env, "A_SECRET=first-route-secret")
	r := c.run("serve", "--listen", "127.0.0.1:0")
	assert.Equal(t, 2, r.code, r)
	assert.Contains(t, r.stderr, "runbook.yaml: webhooks.routes.pair.secret: secret B_SECRET is not set\n"+
		"runbook.yaml: webhooks.routes.sms.secret: secret SMS_SECRET is not set\n", r)
	assert.Empty(t, r.stdout)

	s := c.serve("--sim")
	post := func(route string) int {
		resp, err := http.Post(s.url+"/hooks/"+route, "application/json", strings.NewReader("{}"))
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusNotFound, post("sms"), "a route left out is unknown")
	assert.Equal(t, http.StatusNotFound, post("pair"))
	assert.Equal(t, http.StatusUnauthorized, post("ok"), "a route with its secret is served (and wants it)")
	s.stop(t)
	assert.Contains(t, s.stderr.String(), "warning: webhook route sms is disabled: secret SMS_SECRET is not set")
	assert.Contains(t, s.stderr.String(), "warning: webhook route pair is disabled: secret B_SECRET is not set")
}

func TestServeDefaultsToLoopback(t *testing.T) {
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	s := c.serve()
	assert.True(t, strings.HasPrefix(s.url, "http://127.0.0.1:"), s.url)
	resp, err := http.Get(s.url + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	// It says where its web UI is, and the UI answers there.
	assert.Contains(t, s.banner, "web UI at "+s.url+"/;")
	resp, err = http.Get(s.url + "/")
	require.NoError(t, err)
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	assert.Contains(t, string(page), "<html")
	// The CLI finds the server through the address file next to the state.
	b, err := os.ReadFile(c.state + ".server")
	require.NoError(t, err)
	assert.Contains(t, string(b), s.url)
	s.stop(t)
	_, err = os.Stat(c.state + ".server")
	assert.True(t, os.IsNotExist(err), "the address file is removed at a graceful exit")
}

func TestServeReloadsOnSIGHUPAndKeepsTheSetWhenInvalid(t *testing.T) {
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("playbooks/one.yaml", "version: 1\nname: one\nsteps:\n  - {id: x, uses: log, with: {message: hi}}\n")
	c.file("runbook.yaml", "server: {reload: false}\n")
	s := c.serve()
	names := func() []string {
		_, m := s.api(t, "GET", "/api/v1/playbooks", nil)
		var out []string
		for _, p := range m["playbooks"].([]any) {
			out = append(out, p.(map[string]any)["name"].(string))
		}
		return out
	}
	assert.Equal(t, []string{"one"}, names())

	c.file("playbooks/two.yaml", "version: 1\nname: two\nsteps:\n  - {id: x, uses: log, with: {message: hi}}\n")
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool { return len(names()) == 2 }, 5*time.Second, 20*time.Millisecond)

	// An invalid file: the reload is refused, the set stays, the API shows why.
	c.file("playbooks/bad.yaml", "version: 1\nname: bad\nsteps:\n  - {id: x, uses: nope}\n")
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool {
		_, m := s.api(t, "GET", "/api/v1/playbooks", nil)
		return m["reload_problems"] != nil
	}, 5*time.Second, 20*time.Millisecond)
	assert.Equal(t, []string{"one", "two"}, names())
	_, m := s.api(t, "GET", "/api/v1/playbooks", nil)
	assert.Contains(t, fmt.Sprint(m["reload_problems"]), "bad.yaml:4:")
	s.stop(t)
}

func TestServeReloadsWhenAFileChanges(t *testing.T) {
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("runbook.yaml", "server: {reload_interval: 100ms}\n")
	s := c.serve()
	c.file("playbooks/late.yaml", "version: 1\nname: late\nsteps:\n  - {id: x, uses: log, with: {message: hi}}\n")
	require.Eventually(t, func() bool {
		code, _ := s.api(t, "GET", "/api/v1/playbooks/late", nil)
		return code == 200
	}, 5*time.Second, 50*time.Millisecond)
	s.stop(t)
}

// delivery is one UNSUBSCRIBE webhook delivery of the crash test.
type delivery struct {
	id    string
	hooks []string // hook IDs
	body  []byte
}

func makeDeliveries(n int) []delivery {
	out := make([]delivery, n)
	for i := range out {
		d := delivery{id: fmt.Sprintf("crash-%04d", i)}
		var hooks []map[string]any
		for h := range 1 + i%3 {
			hid := fmt.Sprintf("%s-h%d", d.id, h)
			d.hooks = append(d.hooks, hid)
			hooks = append(hooks, map[string]any{
				"hookId": hid, "recipientNo": fmt.Sprintf("010%04d%04d", i, h), "unsubscribeNo": "0801234567",
				"enterpriseName": "runbook", "createdDateTime": "2026-11-22T09:00:00.000+09:00",
			})
		}
		d.body, _ = json.Marshal(map[string]any{
			"hooksId": d.id, "webhookConfigId": "cfg-1", "productName": "SMS", "appKey": "app-1",
			"event": "UNSUBSCRIBE", "hooks": hooks,
		})
		out[i] = d
	}
	return out
}

// post delivers d; it reports the status (0 when the connection failed).
func (s *serveProc) post(client *http.Client, d delivery, secret string) int {
	req, _ := http.NewRequest("POST", s.url+"/hooks/sms", bytes.NewReader(d.body))
	req.Header.Set("Content-Type", "application/json;charset=UTF-8")
	req.Header.Set("X-Cloud-Webhook-Signature", secret)
	resp, err := client.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestServeKill9WhileWebhooksArrive kills the server while senders post
// deliveries, restarts it and redelivers everything: every delivery that
// got a 2xx has its runs (one per hook), no hook has two, and the
// suppression file lists each number once.
func TestServeKill9WhileWebhooksArrive(t *testing.T) {
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	src, err := os.ReadFile(filepath.Join("..", "..", "playbooks", "sms-unsubscribe.yaml"))
	require.NoError(t, err)
	c.file("playbooks/sms-unsubscribe.yaml", string(src))
	c.file("runbook.yaml", "webhooks:\n  routes:\n    sms: {secret: SMS_WEBHOOK_SECRET}\n")
	supp := filepath.Join(c.dir, "suppression.txt")
	c.env = append(c.env, "SMS_WEBHOOK_SECRET=hook-secret", "SMS_SUPPRESSION_FILE="+supp, "RUNBOOK_FILE_ROOTS="+c.dir)

	deliveries := makeDeliveries(200)
	s := c.serve()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	var mu sync.Mutex
	acked := map[string]bool{}
	next := make(chan delivery)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for d := range next {
				code := s.post(client, d, "hook-secret")
				if code/100 == 2 {
					mu.Lock()
					acked[d.id] = true
					mu.Unlock()
				}
			}
		})
	}
	killed := false
	for i, d := range deliveries {
		next <- d
		if i == 80 && !killed {
			require.NoError(t, s.cmd.Process.Signal(syscall.SIGKILL))
			killed = true
		}
	}
	close(next)
	wg.Wait()
	<-s.done
	require.NotEmpty(t, acked)
	require.Less(t, len(acked), len(deliveries), "the kill came while deliveries were arriving")

	t.Logf("%d of %d deliveries acknowledged before the kill", len(acked), len(deliveries))

	// Restart and redeliver everything, as a sender retrying would.
	t0 := time.Now()
	s = c.serve()
	t.Logf("restarted in %s", time.Since(t0))
	for _, d := range deliveries {
		code := s.post(client, d, "hook-secret")
		require.Equal(t, 200, code, "redelivery of %s", d.id)
	}
	// Every run ends (those interrupted by the kill are resumed).
	var runs []any
	require.Eventually(t, func() bool {
		_, m := s.api(t, "GET", "/api/v1/runs?limit=10000", nil)
		runs = m["runs"].([]any)
		for _, r := range runs {
			if r.(map[string]any)["status"] != "succeeded" {
				return false
			}
		}
		return true
	}, 60*time.Second, 100*time.Millisecond)
	t.Logf("every run ended %s after the restart", time.Since(t0))

	perHook := map[string]int{}
	for _, r := range runs {
		// A listing carries no payload: the hook is named by the run's
		// key, "<playbook>/<trigger>/id:<hookId>".
		_, hookID, _ := strings.Cut(r.(map[string]any)["trigger"].(map[string]any)["key"].(string), "/id:")
		perHook[hookID]++
	}
	total := 0
	for _, d := range deliveries {
		for _, h := range d.hooks {
			total++
			assert.Equal(t, 1, perHook[h], "runs of hook %s (delivery acked before the kill: %v)", h, acked[d.id])
		}
	}
	assert.Len(t, runs, total)
	b, err := os.ReadFile(supp)
	require.NoError(t, err)
	lines := strings.Fields(string(b))
	seen := map[string]bool{}
	for _, l := range lines {
		assert.False(t, seen[l], "number %s suppressed twice", l)
		seen[l] = true
	}
	assert.Len(t, seen, total)
	s.stop(t)
}

// SIGTERM suspends the runs in flight with their state saved (not
// cancelled, no finally); the next start resumes them at once, and a
// sleep sleeps only what was left.
func TestServeSIGTERMSuspendsRunsAndTheNextStartResumesThem(t *testing.T) {
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("playbooks/nap.yaml", `version: 1
name: nap
steps:
  - {id: before, uses: shell, with: {command: "echo x >> before.txt"}}
  - {id: nap, uses: sleep, with: {duration: 1900ms}}
  - {id: after, uses: shell, with: {command: "echo x >> after.txt"}}
finally:
  - {id: cleanup, uses: shell, with: {command: "echo x >> finally.txt"}}
`) // a sleep under 2 s executes; a longer one would park (waiting, not suspended)
	s := c.serve()
	code, m := s.api(t, "POST", "/api/v1/playbooks/nap/runs", map[string]any{})
	require.Equal(t, 201, code, m)
	id := m["id"].(string)
	require.Eventually(t, func() bool {
		_, m := s.api(t, "GET", "/api/v1/runs/"+id, nil)
		sts, _ := m["steps"].([]any)
		for _, st := range sts {
			if st.(map[string]any)["id"] == "nap" {
				return true
			}
		}
		return false
	}, 5*time.Second, 10*time.Millisecond)
	stopped := time.Now()
	s.stop(t)

	r := c.run("runs", "show", id)
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "  status:    suspended\n", "a suspended run is not ended, nor cancelled")
	assert.Contains(t, r.stdout, "it resumes at its next start (or: runbook run --resume "+id+")\n")
	_, napLine, _ := strings.Cut(r.stdout, "\nnap ")
	napLine, _, _ = strings.Cut(napLine, "\n")
	nap := strings.Fields(napLine) // status, attempts, duration: no error
	require.Len(t, nap, 3, "the nap step has no error: %q", nap)
	assert.NotContains(t, r.stdout, "error:")
	// Shell steps run in the playbook's directory.
	_, err := os.Stat(filepath.Join(c.dir, "playbooks", "finally.txt"))
	assert.True(t, os.IsNotExist(err), "finally waits for the real end")

	s = c.serve()
	var final map[string]any
	require.Eventually(t, func() bool {
		_, final = s.api(t, "GET", "/api/v1/runs/"+id, nil)
		return final["status"] == "succeeded"
	}, 10*time.Second, 20*time.Millisecond)
	assert.Less(t, time.Since(stopped), 6*time.Second, "the sleep resumed with what was left")
	for _, f := range []string{"before.txt", "after.txt", "finally.txt"} {
		b, err := os.ReadFile(filepath.Join(c.dir, "playbooks", f))
		require.NoError(t, err, f)
		assert.Equal(t, "x\n", string(b), "%s: each step ran once", f)
	}
	s.stop(t)
	r = c.run("runs", "show", id, "--output", "json")
	require.Equal(t, 0, r.code, r)
	assert.NotContains(t, r.stdout, `"error"`, "the run and its steps carry no error of the suspension once continued")
}

// metricValue returns the value of an unlabelled metric in s's /metrics.
func metricValue(t *testing.T, s *serveProc, name string) float64 {
	t.Helper()
	for line := range strings.Lines(s.get(t, "/metrics")) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err, line)
			return f
		}
	}
	t.Fatalf("no %s in /metrics", name)
	return 0
}

// runbook serve collects at GOGC 400 within its soft memory limit of 160
// MiB, unless GOGC or GOMEMLIMIT says otherwise; without a limit it keeps
// Go's default, so that the heap is never left to grow five-fold
// unbounded.
func TestServeSetsItsCollectionWithinItsMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		env          []string
		gogc, memlim float64
	}{
		{nil, 400, 160 << 20},
		{[]string{"GOGC=150"}, 150, 160 << 20},
		{[]string{"GOMEMLIMIT=1GiB"}, 400, 1 << 30},
		{[]string{"GOMEMLIMIT=off"}, 100, math.MaxInt64},
	} {
		t.Run(strings.Join(append([]string{"env"}, tc.env...), " "), func(t *testing.T) {
			c := newCLI(t)
			c.env = append(c.env, tc.env...)
			require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
			c.file("playbooks/hi.yaml", "version: 1\nname: hi\nsteps:\n  - {id: x, uses: log, with: {message: hi}}\n")
			s := c.serve()
			assert.Equal(t, tc.gogc, metricValue(t, s, "go_gc_gogc_percent"))
			assert.Equal(t, tc.memlim, metricValue(t, s, "go_gc_gomemlimit_bytes"))
		})
	}
}
