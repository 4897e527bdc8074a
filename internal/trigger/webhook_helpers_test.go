package trigger

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

// hookStarter records the runs of the webhook tests' Preparer
// (prepStarter).
type hookStarter struct {
	store state.Store
	mu    sync.Mutex
	reqs  []StartRequest
	ids   []string
	// failAt: see prepStarter.
	failAt int
	calls  int
	seq    int                     // run IDs drawn
	ready  map[string]StartRequest // prepared, not launched (Preparer)
}

// prepStarter is the Preparer of the webhook tests: its runs are committed
// by the intake and recorded when launched, with their trigger as the run
// sees it. Its failAt makes the
// nth Prepare (1-based) return a run without an ID, which fails the
// delivery's commit midway through its transaction.
type prepStarter struct{ *hookStarter }

func (s prepStarter) Prepare(_ context.Context, req StartRequest) (*state.Run, []state.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	s.seq++
	id := fmt.Sprintf("run-%04d", s.seq)
	if s.calls == s.failAt {
		id = ""
	}
	if s.ready == nil {
		s.ready = map[string]StartRequest{}
	}
	s.ready[id] = req
	r := &state.Run{ID: id, Playbook: req.Playbook.Name, Inputs: req.Inputs, Trigger: req.Trigger, Delivery: req.Delivery, Status: state.RunRunning}
	return r, []state.Event{{Type: "run.created"}}, nil
}

func (s prepStarter) Launch(runs ...*state.Run) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range runs {
		req, ok := s.ready[r.ID]
		if !ok {
			panic("launched a run never prepared: " + r.ID)
		}
		delete(s.ready, r.ID)
		if trig, err := state.ResolveTrigger(context.Background(), s.store, r); err == nil {
			req.Trigger = trig // as the run sees it: with the stored delivery's payload and hook
		}
		s.ids = append(s.ids, r.ID)
		s.reqs = append(s.reqs, req)
	}
}

func (s *hookStarter) started() []StartRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]StartRequest(nil), s.reqs...)
}

// hookEnv is an intake over a real bbolt file behind a loopback server.
type hookEnv struct {
	intake  *Intake
	srv     *httptest.Server
	starter *hookStarter
	store   *bolt.Store
}

const testSecret = "s3cret-entered-at-setup"

func newHookEnv(t testing.TB, maxBody int64, playbooks ...string) *hookEnv {
	t.Helper()
	return newEnvWith(t, maxBody, func(st *hookStarter) Preparer { return prepStarter{st} }, playbooks...)
}

// newEnvWith is newHookEnv with the Starter starter makes over the
// recording one.
func newEnvWith(t testing.TB, maxBody int64, starter func(*hookStarter) Preparer, playbooks ...string) *hookEnv {
	t.Helper()
	store, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	var pbs []*playbook.Playbook
	for i, src := range playbooks {
		pb, err := playbook.Parse(fmt.Sprintf("pb%d.yaml", i), []byte(src), playbook.LoadOptions{})
		require.NoError(t, err)
		pbs = append(pbs, pb)
	}
	st := &hookStarter{store: store}
	in, err := NewIntake(IntakeOptions{
		Routes:    map[string]Route{"sms": {Secret: testSecret}, "mail/eu": {Secret: "other"}},
		Store:     store,
		Starter:   starter(st),
		Playbooks: func() []*playbook.Playbook { return pbs },
		MaxBody:   maxBody,
	})
	require.NoError(t, err)
	srv := httptest.NewServer(in)
	t.Cleanup(srv.Close)
	return &hookEnv{intake: in, srv: srv, starter: st, store: store}
}

// answer is a decoded response.
type answer struct {
	status int
	body   map[string]any
	raw    string
}

func (e *hookEnv) post(path string, header map[string]string, body []byte) answer {
	a, err := e.send(path, header, body, false)
	if err != nil {
		panic(err)
	}
	return a
}

// send posts body as post does; chunked sends it without Content-Length.
// The error is the client's (the connection failed).
func (e *hookEnv) send(path string, header map[string]string, body []byte, chunked bool) (answer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	if chunked {
		req.Body, req.GetBody, req.ContentLength = io.NopCloser(bytes.NewReader(body)), nil, -1
	}
	req.Header.Set("Content-Type", "application/json;charset=UTF-8")
	req.Header.Set("X-Cloud-Webhook-Signature", testSecret)
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, raw: string(raw)}
	_ = json.Unmarshal(raw, &a.body)
	return a, nil
}

// unsubscribe builds an UNSUBSCRIBE delivery with one hook per number.
func unsubscribe(hooksID string, numbers ...string) []byte {
	hooks := make([]map[string]any, len(numbers))
	for i, n := range numbers {
		hooks[i] = map[string]any{
			"hookId": hooksID + "-h" + fmt.Sprint(i), "recipientNo": n, "unsubscribeNo": "0808885555",
			"enterpriseName": "런북 주식회사", "createdDateTime": "2026-03-07T09:30:00.000+09:00",
		}
	}
	return envelopeJSON(hooksID, "UNSUBSCRIBE", hooks)
}

func envelopeJSON(hooksID, event string, hooks any) []byte {
	b, _ := json.Marshal(map[string]any{
		"hooksId": hooksID, "webhookConfigId": "cfg-1", "productName": "SMS",
		"appKey": "appkey-1", "event": event, "hooks": hooks,
	})
	return b
}

const perHookPlaybook = `version: 1
name: suppress
inputs:
  number: {type: string}
triggers:
  - webhook: {route: sms, event: UNSUBSCRIBE, each: hook}
    inputs: {number: "${{ trigger.hook.recipientNo }}"}
steps:
  - id: a
    uses: log
    with: {message: hi}
`

const perDeliveryPlaybook = `version: 1
name: audit
triggers:
  - webhook: {route: sms}
steps:
  - id: a
    uses: log
    with: {message: hi}
`
