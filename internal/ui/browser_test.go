package ui_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The browser test drives Debian's chromium against a real `runbook serve
// --sim`: it signs in, starts a playbook from its form, watches the
// timeline and the output fill in live, answers an approval (wrongly
// first), retries from a step, cancels a run, and saves a screenshot of
// every page in its artifact directory (go test -artifacts), and in
// $RUNBOOK_UI_SCREENSHOTS when set (docs/ui/ is made that way).

const browserDemo = `version: 1
name: ui-demo
description: Create a cluster on the simulator, ask for approval, then a step that fails until ok.flag exists.
inputs:
  cluster: {type: string, required: true, pattern: '^[a-z][a-z0-9-]{2,30}$', description: cluster name}
  nodes: {type: integer, default: 2, min: 1, max: 10, description: worker nodes}
steps:
  - id: hello
    uses: log
    with: {message: "creating ${{ inputs.cluster }} with ${{ inputs.nodes }} nodes"}
  - id: create
    uses: nks.cluster.create
    with:
      name: ${{ inputs.cluster }}
      keypair: demo-key
      node_count: ${{ inputs.nodes }}
      flavor_id: 1c5b8e4b-4a57-4d51-9c6f-2b9b3f6a7a01
      fixed_network: a1b2c3d4-0000-4000-8000-000000000001
      fixed_subnet: a1b2c3d4-0000-4000-8000-000000000002
      labels:
        kube_tag: v1.29.3
        availability_zone: kr-pub-a
        node_image: 6f6b9a7e-2a3c-4d8b-9c41-0e5b1f0f6a11
        boot_volume_type: General SSD
        boot_volume_size: 50
      wait: true
      wait_timeout: 30m
  - id: settle
    uses: sleep
    with: {duration: 700ms}
  - id: approve
    uses: approval
    with:
      message: "Upgrade ${{ inputs.cluster }} now?"
      allow_self_approval: true # the test answers as the name it started under
      fields:
        ticket: {type: string, required: true}
        window: {type: integer, required: true}
  - id: flaky
    uses: shell
    with: {command: 'test -f ok.flag && echo "flag found, going on"'}
  - id: report
    uses: log
    with: {message: "cluster ${{ steps.create.outputs.uuid }} ready"}
`

const browserSlow = `version: 1
name: ui-slow
description: Sleeps for an hour (to be cancelled).
triggers:
  - schedule: {cron: "0 3 * * *", timezone: Asia/Seoul, overlap: skip}
steps:
  - id: nap
    uses: sleep
    with: {duration: 1h}
`

const browserHook = `version: 1
name: ui-unsubscribe
description: One run per UNSUBSCRIBE hook.
triggers:
  - webhook: {route: sms, event: UNSUBSCRIBE, each: hook}
steps:
  - id: note
    uses: log
    with: {message: "unsubscribe ${{ trigger.hook.recipientNo }}"}
`

// browserDrain's drain step runs a few seconds and prints a line every
// half second, each with the moment it printed it (Unix milliseconds).
const browserDrain = `version: 1
name: ui-drain
description: Cordons a node, then drains it, one pod every half second.
steps:
  - id: cordon
    uses: shell
    with: {command: "echo cordoned node-7"}
  - id: drain
    uses: shell
    with: {command: 'sleep 1; for i in $(seq 1 8); do echo "evicted pod-$i at $(date +%s%3N)"; sleep 0.5; done'}
`

// viewerToken is the token of vera, a viewer.
const viewerToken = "tok-viewer-vera-000000000000000000000000"

func sha256hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// chromium finds the browser, or skips (fails under
// RUNBOOK_REQUIRE_BROWSER=1 or CI=true).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("RUNBOOK_REQUIRE_BROWSER") == "1" || os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed; the browser tests need it (apt-get install chromium)")
	}
	t.Skip("chromium is not installed: the browser tests are skipped (RUNBOOK_REQUIRE_BROWSER=1 makes this a failure)")
	return ""
}

// serveProc is a `runbook serve --sim` process: where it listens, its
// playbook directory and the runbook binary it runs.
type serveProc struct {
	url, dir, bin string
}

// startServe builds runbook and serves the browser playbooks on the
// embedded simulators, until the test ends.
func startServe(t *testing.T, extra ...map[string]string) *serveProc {
	t.Helper()
	work := t.TempDir()
	bin := filepath.Join(work, "runbook")
	build := exec.Command("go", "build", "-o", bin, "../../cmd/runbook")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	pbs := filepath.Join(work, "playbooks")
	require.NoError(t, os.Mkdir(pbs, 0o700))
	books := map[string]string{"ui-demo.yaml": browserDemo, "ui-slow.yaml": browserSlow, "ui-unsubscribe.yaml": browserHook, "ui-drain.yaml": browserDrain}
	for _, m := range extra {
		maps.Copy(books, m)
	}
	for name, src := range books {
		require.NoError(t, os.WriteFile(filepath.Join(pbs, name), []byte(src), 0o600))
	}
	cfg := filepath.Join(work, "runbook.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(`playbooks: playbooks
server:
  listen: 127.0.0.1:0
  reload: false
webhooks:
  routes:
    sms: {secret: SMS_WEBHOOK_SECRET}
auth:
  users:
    - {name: vera, roles: [viewer], token_sha256: `+sha256hex(viewerToken)+`}
notifications:
  backoff: 200ms
  max_backoff: 1s
  channels:
    pager: {kind: webhook, url: "http://127.0.0.1:9/nobody-listens", secret: PAGER_WHSEC}
  rules:
    - {name: ends, on: [run.cancelled, run.failed, approval.waiting], channels: [pager]}
`), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "serve", "--sim", "--sim-speed", "3000", "--config", cfg, "--state", filepath.Join(work, "state.db"))
	cmd.Env = append(os.Environ(), "RUNBOOK_API_TOKEN="+token, "SMS_WEBHOOK_SECRET=s3cret", "XDG_STATE_HOME="+work,
		"PAGER_WHSEC=whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3")
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`listening on (http://[^;\s]+)`)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case u := <-addr:
		return &serveProc{url: u, dir: pbs, bin: bin}
	case <-time.After(30 * time.Second):
		t.Fatalf("runbook serve did not start: %s", stderr.String())
	}
	return nil
}

// browser is one tab of chromium and where its screenshots go.
type browser struct {
	t    *testing.T
	ctx  context.Context
	base string
	dirs []string

	watch            *commitWatch
	shown, refreshed []int64 // latencies measured so far, ms
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium(t)), chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-gpu", true))
	// Chromium sometimes dies as it starts on a busy machine (its zygote
	// process gone: "write: Broken pipe", seen once in a full go test
	// ./... with both cores busy), before any page exists: it is started
	// again, up to three times. Nothing of the test has run then.
	var ctx context.Context
	for attempt := 1; ; attempt++ {
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		tab, cancel := chromedp.NewContext(actx)
		// The whole tab's budget, against a hang: each wait has its own
		// bound (20 s). TestBrowser took 111 s at load average 35 beside
		// other suites, past the 90 s this was.
		tab, cancelTimeout := context.WithTimeout(tab, 5*time.Minute)
		_, err := chromedp.Run(tab, chromedp.EmulateViewport(1280, 900)) // starts the browser
		if err == nil {
			t.Cleanup(func() {
				cancelTimeout()
				cancel()
				cancelAlloc()
			})
			ctx = tab
			break
		}
		cancelTimeout()
		cancel()
		cancelAlloc()
		if attempt == 3 || !strings.Contains(err.Error(), "chrome failed to start") {
			require.NoError(t, err)
		}
		t.Logf("chromium did not start (attempt %d of 3), starting it again: %.200s", attempt, err)
	}
	dirs := []string{t.ArtifactDir()}
	if d := os.Getenv("RUNBOOK_UI_SCREENSHOTS"); d != "" {
		require.NoError(t, os.MkdirAll(d, 0o755))
		dirs = append(dirs, d)
	}
	return &browser{t: t, ctx: ctx, base: base, dirs: dirs}
}

// do runs actions. A node that a live update of the page replaced between
// its query and its use ("Could not find node with given id") is queried
// again: the actions are run again, a few times. That is safe because no
// call here clicks twice: an action that failed so acted on nothing, and
// what came before it (a navigation, a value set) does the same again.
func (b *browser) do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	var err error
	for range 5 {
		if err = chromedp.Do(b.ctx, actions...); err == nil || !strings.Contains(err.Error(), "Could not find node with given id") {
			break
		}
	}
	require.NoError(b.t, err)
}

func (b *browser) open(path string) { b.t.Helper(); b.do(chromedp.Navigate(b.base + path)) }

// text is the visible text of the first element matching sel, waiting
// for one to exist.
//
// It reads the element in one evaluation: chromedp.Text finds the node,
// then reads its children's text in a second call, and a live refresh
// that replaces the region between the two (as a late output line's
// does) leaves it reading a detached node, whose text is not visible: "".
func (b *browser) text(sel string) string {
	b.t.Helper()
	sel2, err := json.Marshal(sel)
	require.NoError(b.t, err)
	js := `(function () { var e = document.querySelector(` + string(sel2) + `); return e ? e.innerText : null })()`
	deadline := time.Now().Add(20 * time.Second)
	for {
		s, err := chromedp.Run(b.ctx, chromedp.Evaluate[*string](js))
		require.NoError(b.t, err, sel)
		if s != nil {
			return *s
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("no element %s on %s", sel, b.path())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// content is the text of the first element matching sel, shown or
// folded away (in a closed <details>), waiting for one to exist.
func (b *browser) content(sel string) string {
	b.t.Helper()
	b.text(sel) // waits for it
	sel2, err := json.Marshal(sel)
	require.NoError(b.t, err)
	return b.eval(`document.querySelector(` + string(sel2) + `).textContent`)
}

func (b *browser) eval(js string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](js))
	require.NoError(b.t, err, js)
	return s
}

func (b *browser) path() string {
	b.t.Helper()
	loc, err := chromedp.Run(b.ctx, chromedp.Location())
	require.NoError(b.t, err)
	return strings.TrimPrefix(loc, b.base)
}

// waitFor waits until an element matching sel is visible (rendered with
// a box, not visibility: hidden).
//
// It asks the page in one evaluation each time, as text does:
// chromedp.WaitVisible follows the node it found first, and a live
// refresh that replaces the region it is in (a run that ends as its page
// loads) could leave it waiting on a detached node.
func (b *browser) waitFor(sel string) {
	b.t.Helper()
	sel2, err := json.Marshal(sel)
	require.NoError(b.t, err)
	js := `(function () { var l = document.querySelectorAll(` + string(sel2) + `);
		for (var i = 0; i < l.length; i++) if (l[i].getClientRects().length && getComputedStyle(l[i]).visibility !== "hidden") return true;
		return false })()`
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](js))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("waiting for %s on %s: not visible after 20 s (%v)", sel, b.path(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// shot saves a full-page screenshot.
func (b *browser) shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	require.NoError(b.t, err)
	for _, d := range b.dirs {
		require.NoError(b.t, os.WriteFile(filepath.Join(d, name+".png"), png, 0o644))
	}
}

// commitWatch polls a run's events through the API, every few
// milliseconds, to learn when each was committed: no later than the first
// poll that returns it, no earlier than the poll before.
type commitWatch struct {
	mu        sync.Mutex
	committed map[uint64]int64 // seq -> Unix ms of the poll before the one that first saw it
	stop      func()
	done      chan struct{}
}

func watchCommits(t *testing.T, base, runID string) *commitWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &commitWatch{committed: map[uint64]int64{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		first := true
		prev := time.Now().UnixMilli()
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/runs/"+runID+"/events?limit=10000", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			var page struct {
				Events []struct {
					Seq uint64 `json:"seq"`
				} `json:"events"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&page)
			resp.Body.Close()
			w.mu.Lock()
			for _, ev := range page.Events {
				if _, ok := w.committed[ev.Seq]; !ok {
					// Events already there at the first poll were committed
					// before the watch: they are not measured.
					w.committed[ev.Seq] = prev
					if first {
						w.committed[ev.Seq] = -1
					}
				}
			}
			w.mu.Unlock()
			first = false
			prev = time.Now().UnixMilli()
			time.Sleep(3 * time.Millisecond)
		}
	}()
	t.Cleanup(w.close)
	return w
}

func (w *commitWatch) close() {
	w.stop()
	<-w.done
}

// seenTimes is window.runbookSeen: when the page showed each event and
// when its regions next reflected it.
type seenTimes map[string]struct {
	Type      string `json:"type"`
	Shown     int64  `json:"shown"`
	Refreshed int64  `json:"refreshed"`
}

// latencies adds the page's measures to b's: it compares when the page showed each event the watch saw
// committed with when it was committed: the worst time to the event in
// the page's logs, and to the page's status, graph and timeline.
func (b *browser) latencies() {
	b.t.Helper()
	var seen seenTimes
	require.NoError(b.t, json.Unmarshal([]byte(b.eval(`JSON.stringify(window.runbookSeen || {})`)), &seen))
	w := b.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, s := range seen {
		seq, err := strconv.ParseUint(k, 10, 64)
		require.NoError(b.t, err)
		at, ok := w.committed[seq]
		if !ok || at < 0 {
			continue
		}
		b.shown = append(b.shown, s.Shown-at)
		if s.Type != "log" && s.Refreshed > 0 {
			b.refreshed = append(b.refreshed, s.Refreshed-at)
		}
	}
}

func postHook(t *testing.T, base, sig, body string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/hooks/sms", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Cloud-Webhook-Signature", sig)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
}

func TestBrowser(t *testing.T) {
	chromium(t)
	srv := startServe(t)
	b := newBrowser(t, srv.url)
	top := t
	var demoRun string

	t.Run("signs in with the API token", func(t *testing.T) {
		b.t = t
		b.open("/runs")
		b.waitFor(`input[name="token"]`)
		b.shot("login")
		b.do(chromedp.SetValue(chromedp.CSS("#token"), token), chromedp.SetValue(chromedp.CSS("#name"), "ops-alice"),
			chromedp.Submit(chromedp.CSS("#token")))
		b.waitFor("table.list")
		assert.Equal(t, "/runs", b.path())
		assert.Contains(t, b.text(".user"), "ops-alice")
	})

	t.Run("starts a playbook from its form, after an input the CLI would refuse", func(t *testing.T) {
		b.t = t
		b.open("/playbooks/ui-demo")
		b.waitFor("#start-form")
		b.shot("playbook")
		b.do(chromedp.SetValue(chromedp.CSS("#f-cluster"), "Bad Name"), chromedp.SetValue(chromedp.CSS("#f-nodes"), "42"),
			chromedp.Click(chromedp.CSS("#start-form button.primary")))
		b.waitFor(".has-error .field-error")
		assert.Contains(t, b.text("#e-cluster"), "cluster")
		assert.Contains(t, b.text("#e-nodes"), "nodes")
		b.shot("playbook-invalid")
		b.do(chromedp.SetValue(chromedp.CSS("#f-cluster"), "demo-one"), chromedp.SetValue(chromedp.CSS("#f-nodes"), "3"),
			chromedp.Click(chromedp.CSS("#start-form button.primary")))
		b.waitFor("#run")
		require.True(t, strings.HasPrefix(b.path(), "/runs/"), b.path())
		demoRun = strings.TrimPrefix(b.path(), "/runs/")
		b.watch = watchCommits(top, srv.url, demoRun)
	})

	t.Run("its timeline and output fill in live, without a reload", func(t *testing.T) {
		b.t = t
		b.eval(`window.__sameDocument = "yes"`)
		b.waitFor(`#step-create .st-succeeded`)
		b.waitFor(`#timeline rect.seg-succeeded`)
		b.waitFor(`#approval form`)
		// A finished step's output is folded: unfold two, as a user does,
		// once the run waits (a click as a live refresh replaces the step
		// would miss it).
		b.do(chromedp.Click(chromedp.CSS(`#step-hello .step-body > summary`)), chromedp.Click(chromedp.CSS(`#step-create .step-body > summary`)))
		b.waitFor(`#log-hello li.ev-log`)
		assert.Equal(t, "yes", b.eval(`window.__sameDocument || ""`), "the page updated itself")
		assert.Contains(t, b.text("#log-hello"), "creating demo-one with 3 nodes")
		assert.Contains(t, b.text(".head-line"), "waiting")
		assert.Contains(t, b.eval(`document.querySelector("#step-create .plan").textContent`), "POST")
		b.waitFor(`#output-create span.out-call`)
		assert.Regexp(t, `(?m)^POST /nks/v1/clusters 202 `, b.text("#output-create"), "the step's calls are under it")
		b.shot("run-live")
		b.latencies()
	})

	t.Run("a wrong answer to the approval is refused beside its fields, and the run keeps waiting", func(t *testing.T) {
		b.t = t
		b.do(chromedp.SetValue(chromedp.CSS("#f-window"), "soon"), chromedp.Click(chromedp.CSS(`#approval button[value="approve"]`)))
		b.waitFor("#approval .field-error")
		assert.Contains(t, b.text("#e-ticket"), "field ticket is required")
		assert.Contains(t, b.text("#e-window"), "field window must be an integer")
		assert.Contains(t, b.text(".head-line"), "waiting")
		b.shot("approval-refused")
		b.do(chromedp.SetValue(chromedp.CSS("#f-ticket"), "CHG-1234"), chromedp.SetValue(chromedp.CSS("#f-window"), "30"),
			chromedp.SetValue(chromedp.CSS(`#approval textarea[name="comment"]`), "window confirmed"),
			chromedp.Click(chromedp.CSS(`#approval button[value="approve"]`)))
		b.waitFor(`.head-line .st-failed`)
		assert.Contains(t, b.text("#step-flaky"), "exit")
		b.shot("run-failed")
		b.latencies()
		b.watch.close()
		shown, refreshed := b.shown, b.refreshed
		require.NotEmpty(t, shown, "no live update was measured")
		require.NotEmpty(t, refreshed, "no refresh was measured")
		slices.Sort(shown)
		slices.Sort(refreshed)
		t.Logf("live updates after the event's commit: in the logs %d events, median %d ms, worst %d ms; in the status, graph and timeline %d events, median %d ms, worst %d ms",
			len(shown), shown[len(shown)/2], shown[len(shown)-1], len(refreshed), refreshed[len(refreshed)/2], refreshed[len(refreshed)-1])
		// Pushed, not polled: half the updates sooner than a poll's
		// median (half its 3 s interval), and none as late as a poll
		// would make it. The figures on a quiet machine, under 500 ms,
		// are logged above; a bound of 500 ms on the median failed on a
		// machine loaded by parallel suites (1,124 and 1,289 ms at load
		// average 12-17), which no push can help. docs/performance.md
		// keeps the figures; this test keeps the property.
		assert.Less(t, shown[len(shown)/2], int64(1500), "half the events reached the page's log as late as a poll's median")
		assert.Less(t, refreshed[len(refreshed)/2], int64(1500), "half the events reached the page's status as late as a poll's median")
		assert.Less(t, shown[len(shown)-1], int64(3000), "an event reached the page's log as late as a poll")
		assert.Less(t, refreshed[len(refreshed)-1], int64(3000), "an event reached the page's status as late as a poll")
	})

	t.Run("retries from the failed step, reusing the steps before it", func(t *testing.T) {
		b.t = t
		require.NoError(t, os.WriteFile(filepath.Join(srv.dir, "ok.flag"), []byte("ok\n"), 0o600))
		b.do(chromedp.SetValue(chromedp.CSS(".retry-form select"), "flaky"), chromedp.Click(chromedp.CSS(".retry-form button")))
		b.waitFor(`.head-line .st-succeeded`)
		assert.NotEqual(t, "/runs/"+demoRun, b.path(), "a retry is a new run")
		assert.Contains(t, b.text(".facts"), demoRun)
		assert.Contains(t, b.content("#log-create"), "step.reused", "in the step's folded log")
		assert.Contains(t, b.eval(`document.querySelector("#step-flaky .outputs").textContent`), "flag found")
		b.shot("run-retried")
	})

	t.Run("a running step shows its attempt, its time going by and its lines within a second of each", func(t *testing.T) {
		b.t = t
		b.open("/playbooks/ui-drain")
		b.do(chromedp.Click(chromedp.CSS("#start-form button.primary")))
		b.waitFor(`#step-drain .st-running`)
		// Note when each line first shows under the step; lines already
		// there are not measured.
		b.eval(`(function () {
			var seen = window.__lines = {}, first = true;
			function scan() {
				var pre = document.getElementById("output-drain");
				var spans = pre ? pre.querySelectorAll("span") : [];
				for (var i = 0; i < spans.length; i++) {
					var t = spans[i].textContent;
					if (!(t in seen)) seen[t] = first ? -1 : Date.now();
				}
				first = false;
			}
			scan();
			setInterval(scan, 10);
			return "";
		})()`)
		meta := b.text("#step-drain .meta")
		assert.Contains(t, meta, "attempt 1")
		assert.Contains(t, meta, "running for")
		assert.Contains(t, b.text("#step-cordon"), "succeeded")
		assert.Contains(t, b.text(".head-line"), "running")
		ran := b.text("#step-drain [data-since]")
		b.waitFor(`#output-drain span:nth-child(3)`)
		assert.NotEqual(t, ran, b.text("#step-drain [data-since]"), "the time it has run goes by")
		assert.Contains(t, b.text("#step-drain summary"), "lines so far")
		b.shot("run-step-running")
		b.waitFor(`.head-line .st-succeeded`)
		var seen map[string]int64
		require.NoError(t, json.Unmarshal([]byte(b.eval(`JSON.stringify(window.__lines)`)), &seen))
		line := regexp.MustCompile(`^evicted pod-(\d) at (\d{13})$`)
		var late []string
		measured := 0
		for text, at := range seen {
			m := line.FindStringSubmatch(text)
			if m == nil || at < 0 {
				continue
			}
			printed, err := strconv.ParseInt(m[2], 10, 64)
			require.NoError(t, err)
			measured++
			if at-printed > 1000 {
				late = append(late, fmt.Sprintf("pod-%s shown %d ms after it was printed", m[1], at-printed))
			}
		}
		t.Logf("%d lines measured as they were printed", measured)
		assert.GreaterOrEqual(t, measured, 5, "lines seen as printed: %v", seen)
		assert.Empty(t, late)
		assert.Contains(t, b.content("#output-drain"), "evicted pod-8", "in the step's folded output, once it succeeded")
	})

	t.Run("cancels a run", func(t *testing.T) {
		b.t = t
		b.open("/playbooks/ui-slow")
		b.do(chromedp.Click(chromedp.CSS("#start-form button.primary")))
		b.waitFor(`.head-line .st-running, .head-line .st-waiting`) // a long sleep parks
		b.eval(`window.confirm = function () { return true }; ""`)
		b.do(chromedp.Click(chromedp.CSS(`form[action$="/cancel"] button`)))
		b.waitFor(`.head-line .st-cancelled`)
		assert.Contains(t, b.text("#run"), "cancelled by ops-alice")
	})

	t.Run("every page, at 1280 px, on a phone and dark", func(t *testing.T) {
		b.t = t
		b.open("/playbooks/ui-demo")
		b.do(chromedp.SetValue(chromedp.CSS("#f-cluster"), "demo-two"), chromedp.Click(chromedp.CSS("#start-form button.primary")))
		b.waitFor("#approval form")
		postHook(t, srv.url, "s3cret", `{"hooksId":"h-1","event":"UNSUBSCRIBE","hooks":[{"hookId":"k-1","recipientNo":"01012345678"}]}`)
		postHook(t, srv.url, "s3cret", `{"hooksId":"h-1","event":"UNSUBSCRIBE","hooks":[{"hookId":"k-1","recipientNo":"01012345678"}]}`)
		postHook(t, srv.url, "forged", `{"hooksId":"h-2","event":"UNSUBSCRIBE","hooks":[{"hookId":"k-2"}]}`)
		for _, p := range []struct{ path, wait, name string }{
			{"/runs", "table.list tbody tr", "runs"},
			{"/runs?status=failed&status=cancelled", "table.list", "runs-filtered"},
			{"/playbooks", "table.list", "playbooks"},
			{"/approvals", "#approval", "approvals"},
			{"/deliveries", "table.list", "deliveries"},
			{"/notifications", "#notifications tbody tr.row", "notifications"},
			{"/schedules", ".card", "schedules"},
			{"/health", ".cards", "health"},
		} {
			b.open(p.path)
			b.waitFor(p.wait)
			b.shot(p.name)
		}
		b.open("/deliveries")
		body := b.text("table.list")
		assert.Contains(t, body, "accepted")
		assert.Contains(t, body, "duplicate")
		assert.Contains(t, body, "refused")

		// The channel's receiver is down: the run's messages are shown
		// failing, with their attempts and last error, not dropped.
		b.open("/notifications?status=failing")
		b.waitFor("#notifications tbody tr.row")
		rows := b.text("#notifications")
		assert.Contains(t, rows, "failing")
		assert.Contains(t, rows, "connection refused")
		assert.Contains(t, rows, "ui-demo waits for an approval")

		b.open("/runs/" + demoRun + "#step-create")
		b.waitFor("#step-create")
		b.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
		b.open("/runs/" + demoRun)
		b.waitFor("#timeline")
		wide := b.eval(`String(document.documentElement.scrollWidth)`)
		assert.Equal(t, "390", wide, "nothing is wider than a phone's screen")
		b.shot("run-phone")
		b.do(chromedp.EmulateViewport(1280, 900))
		_, err := chromedp.Call(b.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
		require.NoError(t, err)
		b.open("/runs/" + demoRun)
		b.waitFor("#timeline")
		b.shot("run-dark")
	})

	var waitingRun string
	t.Run("a viewer is offered nothing it may not do", func(t *testing.T) {
		b.t = t
		b.open("/approvals")
		b.waitFor("#approval")
		waitingRun = b.eval(`document.querySelector("#approval form").getAttribute("action").split("/")[2]`)
		b.do(chromedp.Click(chromedp.CSS(`form[action="/logout"] button`)))
		b.waitFor(`input[name="token"]`)
		b.do(chromedp.SetValue(chromedp.CSS("#token"), viewerToken), chromedp.Submit(chromedp.CSS("#token")))
		b.waitFor("table.list")
		assert.Contains(t, b.text(".user"), "vera")
		b.open("/runs/" + waitingRun)
		b.waitFor("#approval")
		// The search of the run's lines is a form too, a GET that changes nothing.
		assert.Equal(t, "0", b.eval(`String(document.querySelectorAll('#run form[method="post"]').length)`), "no approval, cancel, retry or resume form")
		assert.Equal(t, "1", b.eval(`String(document.querySelectorAll("#run form").length)`), "only the search")
		assert.Contains(t, b.text("#approval"), "You may not answer approvals")
		b.shot("viewer-run")
		b.open("/playbooks/ui-demo")
		b.waitFor("h1")
		assert.Equal(t, "0", b.eval(`String(document.querySelectorAll("#start-form").length)`))
		b.open("/playbooks")
		b.waitFor("table.list")
		assert.Equal(t, "0", b.eval(`String(document.querySelectorAll('form[action="/playbooks/reload"]').length)`))
	})

	t.Run("keyboard: j selects the first run and Enter opens it", func(t *testing.T) {
		b.t = t
		b.open("/runs")
		b.waitFor("table.list tbody tr.row")
		b.do(chromedp.KeyEvent("j"), chromedp.KeyEvent("\r"))
		b.waitFor("#run")
		assert.True(t, strings.HasPrefix(b.path(), "/runs/"), b.path())
	})

}
