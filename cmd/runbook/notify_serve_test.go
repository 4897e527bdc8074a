package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
)

var notifyKey = []byte("notify-signing-key-0123456789abcd")

const (
	// leakedSecret is a secret a failing playbook puts in its error.
	leakedSecret = "tok-5f2e91c8aa07b3d4"
	boomPlaybook = `version: 1
name: boom
steps:
  - id: explode
    uses: fail
    with: {message: "the token ${{ secrets.CLUSTER_TOKEN }} was refused", code: unauthorized}
`
	tellPlaybook = `version: 1
name: tell
steps:
  - id: tell
    uses: notify
    with:
      channel: pager
      subject: deploy done
      message: "prod-1 is on v1.29.3 (deployed with ${{ secrets.CLUSTER_TOKEN }})"
`
	approversPlaybook = `version: 1
name: signoff
steps:
  - id: gate
    uses: approval
    with: {message: ship it?, approvers: [alice, "role:approver"]}
`
)

// hookReceiver is a signed-webhook receiver on loopback that verifies
// each signature and counts the messages it accepted by webhook-id. While
// held, it answers nothing: a request waits until it is released or its
// sender goes away (then it is not counted).
type hookReceiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	byID    map[string]int
	bodies  map[string]map[string]any
	raw     []string
	held    chan struct{} // closed: released
	waiting int
	// inflight holds the remote addresses of the requests being held.
	inflight map[string]bool
}

func newHookReceiver(t *testing.T, held bool) *hookReceiver {
	r := &hookReceiver{byID: map[string]int{}, bodies: map[string]map[string]any{}, held: make(chan struct{}), inflight: map[string]bool{}}
	if !held {
		close(r.held)
	}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *hookReceiver) serve(w http.ResponseWriter, req *http.Request) {
	raw, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.waiting++
	r.inflight[req.RemoteAddr] = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.inflight, req.RemoteAddr)
		r.mu.Unlock()
	}()
	select {
	case <-r.held:
	case <-req.Context().Done(): // the sender died or gave up
		r.mu.Lock()
		r.waiting--
		r.mu.Unlock()
		return
	}
	id, ts := req.Header.Get("webhook-id"), req.Header.Get("webhook-timestamp")
	mac := hmac.New(sha256.New, notifyKey)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(raw)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waiting--
	if !hmac.Equal([]byte(req.Header.Get("webhook-signature")), []byte(want)) {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	r.byID[id]++
	r.bodies[id] = body
	r.raw = append(r.raw, string(raw))
	w.WriteHeader(http.StatusNoContent)
}

func (r *hookReceiver) release() { close(r.held) }

// sendersAlive reports whether every request held has its connection
// still established, as the kernel sees it (/proc/net/tcp): once a
// sender is killed, the receiver's end of its connection leaves
// ESTABLISHED at once, while the server notices the close and cancels
// the request's context a little later. Released before it noticed, the
// receiver would take the dead sender's message as delivered.
func (r *hookReceiver) sendersAlive(t *testing.T) bool {
	raw, err := os.ReadFile("/proc/net/tcp")
	require.NoError(t, err)
	established := map[string]bool{} // "local remote" in /proc's hex form
	for _, line := range strings.Split(string(raw), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 3 && f[3] == "01" {
			established[f[1]+" "+f[2]] = true
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for remote := range r.inflight {
		if !established[procAddr(t, r.srv.Listener.Addr().String())+" "+procAddr(t, remote)] {
			return false
		}
	}
	return true
}

// procAddr writes an IPv4 host:port as /proc/net/tcp does: the address's
// four bytes as one little-endian hex word, then the port in hex.
func procAddr(t *testing.T, hostport string) string {
	ap, err := netip.ParseAddrPort(hostport)
	require.NoError(t, err)
	b := ap.Addr().As4()
	return fmt.Sprintf("%02X%02X%02X%02X:%04X", b[3], b[2], b[1], b[0], ap.Port())
}

func (r *hookReceiver) counts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for k, v := range r.byID {
		out[k] = v
	}
	return out
}

func (r *hookReceiver) body(id string) map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bodies[id]
}

// notifyConfig is a runbook.yaml sending run.failed and approval.waiting
// to the receiver, signed.
func notifyConfig(url, extra string) string {
	return fmt.Sprintf(`server: {public_url: "https://runbook.example.com", %s}
notifications:
  backoff: 200ms
  max_backoff: 1s
  send_timeout: 2s
  channels:
    pager: {kind: webhook, url: %q, secret: PAGER_WHSEC}
  rules:
    - name: failures
      on: [run.failed]
      channels: [pager]
    - name: approvals
      on: [approval.waiting]
      channels: [pager]
`, extra, url)
}

func notifyEnv(c *cli) {
	c.env = append(c.env, "RUNBOOK_SECRET_PAGER_WHSEC=whsec_"+base64.StdEncoding.EncodeToString(notifyKey),
		"RUNBOOK_SECRET_CLUSTER_TOKEN="+leakedSecret)
}

func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "%s: not within %s", what, within)
		time.Sleep(50 * time.Millisecond)
	}
}

// runbook serve tells a signed webhook of a failed run (with its error,
// masked, and its link) and of an approval waiting (with who may answer),
// and lists both, sent, in GET /api/v1/notifications.
func TestServeNotifiesAFailedRunAndAWaitingApproval(t *testing.T) {
	c := newCLI(t)
	notifyEnv(c)
	recv := newHookReceiver(t, false)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("playbooks/boom.yaml", boomPlaybook)
	c.file("playbooks/signoff.yaml", approversPlaybook)
	c.file("playbooks/tell.yaml", tellPlaybook)
	c.file("runbook.yaml", notifyConfig(recv.srv.URL, "reload: false"))
	s := c.serve("--config", filepath.Join(c.dir, "runbook.yaml"))

	code, run := s.api(t, "POST", "/api/v1/playbooks/boom/runs", map[string]any{})
	require.Equal(t, 201, code, run)
	failed := run["id"].(string)
	code, run = s.api(t, "POST", "/api/v1/playbooks/signoff/runs", map[string]any{})
	require.Equal(t, 201, code, run)
	waiting := run["id"].(string)

	code, run = s.api(t, "POST", "/api/v1/playbooks/tell/runs", map[string]any{})
	require.Equal(t, 201, code, run)
	told := run["id"].(string)

	failKey, waitKey, tellKey := "run.failed/"+failed+"@pager", "approval.waiting/"+waiting+"/gate@pager", "step/"+told+"/tell"
	waitUntil(t, 20*time.Second, "the three messages", func() bool {
		n := recv.counts()
		return n[failKey] == 1 && n[waitKey] == 1 && n[tellKey] == 1
	})
	tb := recv.body(tellKey)
	assert.Equal(t, "step.notify", tb["type"])
	assert.Equal(t, "deploy done", tb["subject"])
	assert.Contains(t, tb["text"], "prod-1 is on v1.29.3 (deployed with ***)")
	b := recv.body(failKey)
	assert.Equal(t, "run.failed", b["type"])
	assert.Equal(t, "boom failed", b["subject"])
	text, _ := b["text"].(string)
	assert.Contains(t, text, "Run: "+failed+" (playbook boom, started by the API")
	assert.Contains(t, text, "Error: unauthorized: ")
	assert.Contains(t, text, "Link: https://runbook.example.com/runs/"+failed)
	data, _ := b["data"].(map[string]any)
	assert.Equal(t, "https://runbook.example.com/runs/"+failed, data["link"])
	w := recv.body(waitKey)
	assert.Equal(t, "signoff waits for an approval at step gate", w["subject"])
	assert.Contains(t, w["text"], "Who may answer: alice, role:approver")
	for _, raw := range recv.raw {
		assert.NotContains(t, raw, leakedSecret, "a message carries the secret")
	}

	code, list := s.api(t, "GET", "/api/v1/notifications", nil)
	require.Equal(t, 200, code, list)
	waitUntil(t, 10*time.Second, "both recorded sent", func() bool {
		_, list = s.api(t, "GET", "/api/v1/notifications?status=sent", nil)
		ns, _ := list["notifications"].([]any)
		return len(ns) == 2
	})
	for _, n := range list["notifications"].([]any) {
		m := n.(map[string]any)
		assert.Equal(t, float64(1), m["attempts"], m["key"])
		assert.NotContains(t, m["text"], leakedSecret)
	}
	time.Sleep(500 * time.Millisecond)
	assert.Equal(t, map[string]int{failKey: 1, waitKey: 1, tellKey: 1}, recv.counts(), "each event once")
}

// Two replicas on PostgreSQL send twelve failure notifications to a
// receiver that holds every request; replica A is killed with kill -9
// while it holds claims on some. Once the receiver answers, replica B
// sends every message, A's after its claims lapse: each event reaches the
// receiver exactly once, counted by webhook-id.
func TestAKilledReplicasNotificationsAreSentOnceByAnother(t *testing.T) {
	c := newCLI(t)
	notifyEnv(c)
	dsn := onDatabase(t, c)
	recv := newHookReceiver(t, true)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("playbooks/boom.yaml", boomPlaybook)
	c.file("runbook.yaml", notifyConfig(recv.srv.URL, "lease: "+replicaLease.String()))
	host, err := os.Hostname()
	require.NoError(t, err)
	rs := &replicaSet{c: c, args: []string{"--config", filepath.Join(c.dir, "runbook.yaml")}, proc: make([]*serveProc, 2), host: host}
	rs.start(0)
	rs.start(1)
	a, b := rs.proc[0], rs.proc[1]
	st, err := postgres.Open(context.Background(), dsn, postgres.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })

	var ids []string
	for i := range 12 {
		s := a
		if i%2 == 1 {
			s = b
		}
		code, run := s.api(t, "POST", "/api/v1/playbooks/boom/runs", map[string]any{})
		require.Equal(t, 201, code, run)
		ids = append(ids, run["id"].(string))
	}
	for _, id := range ids {
		waitStatus(t, st, id, state.RunFailed, 20*time.Second)
	}
	aOwner := rs.owner(0)
	var heldByA int
	waitUntil(t, 20*time.Second, "replica A holding claims on messages", func() bool {
		ns, err := st.ListNotifications(context.Background(), state.NotificationFilter{})
		require.NoError(t, err)
		heldByA = 0
		for _, n := range ns {
			if sameOwner(aOwner, n.ClaimedBy) {
				heldByA++
			}
		}
		return len(ns) == 12 && heldByA > 0
	})
	a.kill()
	killed := time.Now()
	t.Logf("killed replica A holding claims on %d of 12 messages", heldByA)
	// A real receiver answers only the requests whose senders are alive
	// to read the answer; wait until this one has dropped A's.
	waitUntil(t, 10*time.Second, "the receiver dropping the killed replica's requests", func() bool { return recv.sendersAlive(t) })
	recv.release()

	waitUntil(t, 60*time.Second, "every event at the receiver", func() bool { return len(recv.counts()) == 12 })
	t.Logf("the 12th event arrived %s after the kill", time.Since(killed).Round(time.Millisecond))
	waitUntil(t, 20*time.Second, "every message recorded sent", func() bool {
		ns, err := st.ListNotifications(context.Background(), state.NotificationFilter{Status: []state.NotificationStatus{state.NotifySent}})
		require.NoError(t, err)
		return len(ns) == 12
	})
	time.Sleep(time.Second)
	for _, id := range ids {
		assert.Equal(t, 1, recv.counts()["run.failed/"+id+"@pager"], "run %s", id)
	}
	_, list := b.api(t, "GET", "/api/v1/notifications?limit=5", nil)
	assert.Len(t, list["notifications"], 5)
	assert.NotEmpty(t, list["next"], "a second page")
	_, page := b.api(t, "GET", "/api/v1/notifications?limit=10&before="+list["next"].(string), nil)
	assert.Len(t, page["notifications"], 7)
	for _, raw := range recv.raw {
		assert.False(t, strings.Contains(raw, leakedSecret), "a message carries the secret")
	}
}

// runbook notify test RULE sends a sample through each channel of the
// rule and prints each channel's answer: ok for the signed webhook that
// verified it, FAIL with the answer for one that refused it (exit 1); an
// unknown rule is a usage error naming the rules.
func TestNotifyTestSendsASampleThroughEachChannelOfTheRule(t *testing.T) {
	c := newCLI(t)
	notifyEnv(c)
	good := newHookReceiver(t, false)
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such hook", http.StatusGone)
	}))
	t.Cleanup(broken.Close)
	c.file("runbook.yaml", fmt.Sprintf(`notifications:
  channels:
    pager: {kind: webhook, url: %q, secret: PAGER_WHSEC}
    chat: {kind: slack, url: %q}
  rules:
    - {name: failures, on: [run.failed], playbooks: [nightly-resize], channels: [pager, chat]}
`, good.srv.URL, broken.URL))
	r := c.run("notify", "test", "failures")
	assert.Equal(t, 1, r.code, "%s%s", r.stdout, r.stderr)
	assert.Contains(t, r.stdout, `ok    pager (webhook): sent "[test] nightly-resize failed" in `)
	assert.Contains(t, r.stdout, "FAIL  chat (slack): the receiver answered 410 Gone: no such hook")
	counts := good.counts()
	require.Len(t, counts, 1)
	for id := range counts {
		assert.True(t, strings.HasPrefix(id, "test/failures/TEST-"), id)
		assert.Contains(t, good.body(id)["text"], "this is a test of notification rule failures")
	}

	r = c.run("notify", "test", "failure")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, `no notification rule "failure"`)
	assert.Contains(t, r.stderr, `did you mean "failures"?`)
}

// runbook validate checks that a notify step names a channel of the
// config when the config is known (./runbook.yaml or --config), at the
// step's with.channel.
func TestValidateChecksANotifyStepsChannelAgainstTheConfig(t *testing.T) {
	c := newCLI(t)
	c.file("tell.yaml", strings.ReplaceAll(tellPlaybook, "channel: pager", "channel: pagr"))
	r := c.run("validate", "tell.yaml")
	assert.Equal(t, 0, r.code, "without a config the channel is checked at run time: %s", r.stderr)

	c.file("runbook.yaml", notifyConfig("http://127.0.0.1:9/x", "reload: false"))
	r = c.run("validate", "tell.yaml")
	assert.Equal(t, 2, r.code, r.stdout)
	assert.Contains(t, r.stderr, `tell.yaml:7:7: steps[0].with.channel: channel "pagr" is not in notifications.channels of runbook.yaml (channels: pager); did you mean "pager"?`)

	c.file("tell.yaml", tellPlaybook)
	r = c.run("validate", "--config", filepath.Join(c.dir, "runbook.yaml"), "tell.yaml")
	assert.Equal(t, 0, r.code, r.stderr)
}

// A notification channel's secret that is not set: config check warns at
// its place in the file, and serve refuses to start, naming the place.
func TestAChannelsMissingSecretIsNamedWhereTheConfigNamesIt(t *testing.T) {
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("runbook.yaml", notifyConfig("http://127.0.0.1:9/x", "reload: false"))
	r := c.run("config", "check")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "warning: runbook.yaml:7:65: notifications.channels.pager.secret: secret PAGER_WHSEC is not set")
	r = c.run("serve", "--listen", "127.0.0.1:0")
	assert.Equal(t, 2, r.code, r.stdout)
	assert.Contains(t, r.stderr, "runbook.yaml:7:65: notifications.channels.pager.secret: secret PAGER_WHSEC is not set")

	c.env = append(c.env, "RUNBOOK_SECRET_PAGER_WHSEC=not-a-whsec")
	r = c.run("serve", "--listen", "127.0.0.1:0")
	assert.Equal(t, 2, r.code, r.stdout)
	assert.Contains(t, r.stderr, "runbook.yaml:7:5: notifications.channels.pager: channel pager: secret PAGER_WHSEC: a signing secret is whsec_")
}

// Three deliveries to a webhook route refused within the rule's window
// (a bad signature): runbook serve tells the channel once.
func TestABurstOfRefusedDeliveriesIsNotifiedOnce(t *testing.T) {
	c := newCLI(t)
	notifyEnv(c)
	c.env = append(c.env, "SMS_SECRET=right-secret")
	recv := newHookReceiver(t, false)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("runbook.yaml", fmt.Sprintf(`webhooks:
  routes:
    sms: {secret: SMS_SECRET}
notifications:
  channels:
    pager: {kind: webhook, url: %q, secret: PAGER_WHSEC}
  rules:
    - {name: refusals, on: [delivery.refused], burst: 3, within: 1m, channels: [pager]}
`, recv.srv.URL))
	s := c.serve("--config", filepath.Join(c.dir, "runbook.yaml"))
	for i := range 4 {
		req, err := http.NewRequest("POST", s.url+"/hooks/sms", strings.NewReader(fmt.Sprintf(`{"hooksId":"h-%d","event":"UNSUBSCRIBE","hooks":[]}`, i)))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Cloud-Webhook-Signature", "wrong-secret")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	}
	waitUntil(t, 20*time.Second, "the refusal burst's message", func() bool { return len(recv.counts()) == 1 })
	time.Sleep(time.Second)
	counts := recv.counts()
	require.Len(t, counts, 1, "one message for the burst, not one per refusal past it")
	for id, n := range counts {
		assert.True(t, strings.HasPrefix(id, "delivery.refused/sms/refusals/"), id)
		assert.Equal(t, 1, n)
		assert.Equal(t, "webhook route sms refuses deliveries", recv.body(id)["subject"])
	}
}
