package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/auth"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/secrets"
	"github.com/runbook/runbook/internal/state"
)

// apiTokenSecret is the secret holding the API's bearer token: the one
// the CLI sends (a person's token, or the server's), and the one `runbook
// serve` takes as its own by default (server.token_secret).
const apiTokenSecret = "RUNBOOK_API_TOKEN"

// deprecatedTokenVar is the variable the CLI read a person's token from
// before apiTokenSecret was the one name; still honoured, with a warning.
const deprecatedTokenVar = "RUNBOOK_TOKEN"

// apiToken is the token the CLI sends: $RUNBOOK_TOKEN while it is still
// set (it came first), else the secret RUNBOOK_API_TOKEN (environment or
// secrets file).
func (a *app) apiToken(src *secrets.Source) (string, bool) {
	if t := os.Getenv(deprecatedTokenVar); t != "" {
		fmt.Fprintf(a.stderr, "warning: $%s is deprecated: set %s to the token instead (yours or the server's); %s is used while it is set\n", deprecatedTokenVar, apiTokenSecret, deprecatedTokenVar)
		return t, true
	}
	return src.Lookup(apiTokenSecret)
}

// apiBackend talks to the HTTP API of `runbook serve` (docs/api.md).
type apiBackend struct {
	base  string
	token string
	hc    *http.Client
	// who names the other end in messages when it is not a runbook serve
	// at base: the socket of the runbook run holding the state file local
	// (local.go).
	who, local string
}

func (b *apiBackend) close() {}

// name is how messages name the other end.
func (b *apiBackend) name() string {
	if b.who != "" {
		return b.who
	}
	return "runbook serve at " + b.base
}

// do sends a request and decodes a 2xx answer into out (when not nil). An
// error answer becomes a *fault.Error with the API's code and message.
func (b *apiBackend) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, b.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+b.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		return &exitError{code: 1, err: &fault.Error{Code: fault.Unavailable, Message: fmt.Sprintf("%s: %v", b.name(), err)},
			hint: "check that runbook serve runs (or pass --server URL)"}
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return b.answerError(resp)
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode the answer of %s %s: %w", method, path, err)
	}
	return nil
}

// answerError turns an error answer of the API into an error with the
// API's code.
func (b *apiBackend) answerError(resp *http.Response) error {
	var e api.ErrorBody
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if json.Unmarshal(data, &e) != nil || e.Error == "" {
		e.Error = fmt.Sprintf("%s: %s", resp.Status, oneLine(string(data), 200))
		e.Code = string(fault.CodeForHTTPStatus(resp.StatusCode))
	}
	msg := e.Error
	if len(e.Problems) > 0 {
		msg += ":\n  " + strings.Join(e.Problems, "\n  ")
	}
	err := &fault.Error{Code: fault.Code(e.Code), Message: msg}
	if resp.StatusCode == http.StatusUnauthorized {
		hint := "set " + apiTokenSecret + " to your token (an admin creates one with runbook token create) or to the server's; a token may be revoked or expired"
		return &exitError{code: 1, err: fmt.Errorf("%s refused the API token: %w", b.name(), err), hint: hint}
	}
	return err
}

func (b *apiBackend) list(ctx context.Context, f state.RunFilter) ([]*state.Run, error) {
	q := api.RunQuery{Status: f.Status, Playbook: f.Playbook, Parent: f.ParentID, Children: true, Limit: api.MaxRunLimit}
	if f.Limit > 0 {
		q.Limit = min(f.Limit, api.MaxRunLimit)
	}
	var runs []*state.Run
	for {
		var out api.RunList
		if err := b.do(ctx, http.MethodGet, "/api/v1/runs?"+q.Values().Encode(), nil, &out); err != nil {
			return nil, err
		}
		runs = append(runs, records(out.Runs)...)
		if out.Next == "" || f.Limit > 0 && len(runs) >= f.Limit {
			return runs, nil
		}
		next, err := state.ParseRunCursor(out.Next)
		if err != nil {
			return nil, fmt.Errorf("the run list's next: %w", err)
		}
		q.Before = next
		if f.Limit > 0 {
			q.Limit = min(f.Limit-len(runs), api.MaxRunLimit)
		}
	}
}

// records are the runs of an API answer as the store holds them.
func records(runs []api.Run) []*state.Run {
	out := make([]*state.Run, len(runs))
	for i, r := range runs {
		out[i] = r.Run
	}
	return out
}

func (b *apiBackend) show(ctx context.Context, id string) (*api.Run, error) {
	var r api.Run
	err := b.do(ctx, http.MethodGet, "/api/v1/runs/"+url.PathEscape(id), nil, &r)
	if stored, ok := b.holderEnded(ctx, id, err); ok {
		return stored, nil
	}
	if fault.CodeOf(err) == fault.NotFound {
		return nil, &exitError{code: 1, err: fmt.Errorf("no run %q", id), hint: "runbook runs list"}
	}
	if err != nil {
		return nil, withHint(err, "")
	}
	return &r, nil
}

func (b *apiBackend) get(ctx context.Context, id string) (*state.Run, error) {
	r, err := b.show(ctx, id)
	if err != nil {
		return nil, err
	}
	return r.Run, nil
}

func (b *apiBackend) steps(ctx context.Context, id string) ([]*state.StepRecord, error) {
	r, err := b.show(ctx, id)
	if err != nil {
		return nil, err
	}
	recs := make([]*state.StepRecord, len(r.Steps))
	for i, s := range r.Steps {
		recs[i] = s.StepRecord
	}
	return recs, nil
}

func (b *apiBackend) children(ctx context.Context, id string) ([]*state.Run, error) {
	return b.list(ctx, state.RunFilter{ParentID: id})
}

func (b *apiBackend) events(ctx context.Context, id string, after uint64) ([]state.Event, error) {
	const page = 10000
	var all []state.Event
	for {
		var out api.EventPage
		path := fmt.Sprintf("/api/v1/runs/%s/events?after=%d&limit=%d", url.PathEscape(id), after, page)
		if err := b.do(ctx, http.MethodGet, path, nil, &out); err != nil {
			if rest, ok := b.holderEndedEvents(ctx, id, after, err); ok {
				return append(all, rest...), nil
			}
			return nil, err
		}
		all = append(all, out.Events...)
		if len(out.Events) < page {
			return all, nil
		}
		after = out.Events[len(out.Events)-1].Seq
	}
}

func (b *apiBackend) cancel(ctx context.Context, id string) error {
	return b.do(ctx, http.MethodPost, "/api/v1/runs/"+url.PathEscape(id)+"/cancel", nil, nil)
}

func (b *apiBackend) approve(ctx context.Context, id, step string, ans state.Approval) error {
	body := api.ApproveRequest{Step: step, Approve: &ans.Approved, By: ans.By, Comment: ans.Comment, Fields: ans.Fields}
	return b.do(ctx, http.MethodPost, "/api/v1/runs/"+url.PathEscape(id)+"/approve", body, nil)
}

func (b *apiBackend) retry(ctx context.Context, id, from string, secretInputs map[string]any) (*state.Run, error) {
	var r api.Run
	body := api.RetryRequest{From: from, Inputs: secretInputs}
	err := b.do(ctx, http.MethodPost, "/api/v1/runs/"+url.PathEscape(id)+"/retry", body, &r)
	if err != nil {
		return nil, err
	}
	return r.Run, nil
}

// follow streams the events of run id after sequence number after through
// the API's Server-Sent Events, calling each for every event, until the
// run ends (it returns the final status), each returns false (it returns
// ""), or ctx ends. A stream cut short is resumed where it stopped.
func (b *apiBackend) follow(ctx context.Context, id string, after uint64, each func(state.Event) bool) (state.RunStatus, error) {
	failures := 0
	for {
		status, stop, err := b.stream(ctx, id, &after, each)
		switch {
		case stop:
			return status, nil
		case ctx.Err() != nil:
			return "", ctx.Err()
		case err != nil:
			failures++
			if failures >= 5 {
				return "", err
			}
		default:
			failures = 0
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(time.Duration(failures) * 300 * time.Millisecond):
		}
	}
}

// stream reads one SSE connection. stop reports that the run ended or each
// asked to stop; otherwise the caller reconnects.
func (b *apiBackend) stream(ctx context.Context, id string, after *uint64, each func(state.Event) bool) (status state.RunStatus, stop bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/api/v1/runs/%s/logs?after=%d", b.base, url.PathEscape(id), *after), nil)
	if err != nil {
		return "", false, err
	}
	req.Header.Set("Authorization", "Bearer "+b.token)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := b.hc.Do(req)
	if err != nil {
		err = &fault.Error{Code: fault.Unavailable, Message: fmt.Sprintf("%s: %v", b.name(), err)}
		if status, ok := b.holderEndedStream(ctx, id, after, each, err); ok {
			return status, true, nil
		}
		return "", false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		err := b.answerError(resp)
		return "", fault.CodeOf(err) != fault.Unavailable, err // only a restart is worth waiting for
	}
	var ended *api.StreamEnd
	stopped, err := readSSE(resp.Body, func(sev sseEvent) (bool, error) {
		if sev.typ == "end" {
			ended = &api.StreamEnd{}
			_ = json.Unmarshal([]byte(sev.data), ended)
			return false, nil
		}
		var ev state.Event
		if err := json.Unmarshal([]byte(sev.data), &ev); err != nil {
			return false, fmt.Errorf("decode an event of run %s: %w", id, err)
		}
		if ev.Seq <= *after {
			return true, nil
		}
		*after = ev.Seq
		return each(ev), nil
	})
	if err != nil || !stopped {
		return "", false, err
	}
	if ended == nil {
		return "", true, nil // each asked to stop
	}
	// The server may end the stream before sending the events committed
	// with the final status: read what is left.
	rest, err := b.events(ctx, id, *after)
	if err != nil {
		return "", false, err
	}
	for _, ev := range rest {
		*after = ev.Seq
		if !each(ev) {
			break
		}
	}
	return ended.Status, true, nil
}

// personal reports whether the token sent names a person (a token of
// theirs, a user of the config, an OIDC token), whose identity the server
// records with an answer: a name of our own would be refused as answering
// for someone else. The server's token names no one, nor does the socket
// of a runbook run.
func (b *apiBackend) personal(ctx context.Context) bool {
	if b.token == "" {
		return false
	}
	var w api.Whoami
	return b.do(ctx, http.MethodGet, "/api/v1/whoami", nil, &w) == nil && w.Kind != auth.KindServer
}

// approveRemote answers an approval through the server, which continues
// the run, and shows the run's progress as the server reports it.
func (a *app) approveRemote(ctx context.Context, b *apiBackend, r *state.Run, step string, answer state.Approval, verdict string, noWait bool, out *outputFlag, quiet bool) error {
	root := rootRun(ctx, b.get, r)
	if noWait {
		if err := b.approve(ctx, r.ID, step, answer); err != nil {
			return withHint(err, "runbook runs show "+r.ID)
		}
		who := "runbook serve"
		if b.local != "" {
			who = b.who
		}
		fmt.Fprintf(a.stdout, "step %s of run %s %s; %s continues the run: runbook runs logs -f %s\n", step, r.ID, verdict, who, root.ID)
		return nil
	}
	// Show only what the answer causes: start the streams after the events
	// written so far.
	ids := []string{root.ID}
	if r.ID != root.ID {
		ids = append(ids, r.ID)
	}
	after := make([]uint64, len(ids))
	for i, id := range ids {
		evs, err := b.events(ctx, id, 0)
		if err != nil {
			return withHint(err, "")
		}
		if n := len(evs); n > 0 {
			after[i] = evs[n-1].Seq
		}
	}
	if err := b.approve(ctx, r.ID, step, answer); err != nil {
		return withHint(err, "runbook runs show "+r.ID)
	}
	return a.followRemote(ctx, b, ids, after, out, quiet)
}

// followRemote shows the progress of runs ids (the first is the root)
// after the events after, as the server reports it, until the root run
// ends or waits for an approval, and reports it with runbook run's output
// and exit code.
func (a *app) followRemote(ctx context.Context, b *apiBackend, ids []string, after []uint64, out *outputFlag, quiet bool) error {
	p := a.newProgress(out, quiet, ids[0])
	err := a.watchRemote(ctx, b, ids, after, p)
	p.close()
	if err != nil {
		return err
	}
	return a.finishRemote(ctx, b, ids[0], out)
}

// watchRemote shows the events of runs ids (the first is the root) until
// the root run ends or a step starts waiting for an approval.
func (a *app) watchRemote(ctx context.Context, b *apiBackend, ids []string, after []uint64, p progress) error {
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	errs := make(chan error, len(ids))
	for i, id := range ids {
		go func() {
			_, err := b.follow(wctx, id, after[i], func(ev state.Event) bool {
				p.observe(id, ev)
				if waitsForAnAnswer(ev) {
					stop()
					return false
				}
				return true
			})
			if i == 0 {
				stop() // the root ended: its sub-playbook runs did too
			}
			if wctx.Err() != nil {
				err = nil
			}
			errs <- err
		}()
	}
	var first error
	for range ids {
		if err := <-errs; err != nil && first == nil {
			first = err
			stop()
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return withHint(first, "runbook runs show "+ids[0])
}

// waitsForAnAnswer reports whether ev is a step beginning to wait for an
// approval, where following a run stops: a step waiting until a moment
// (a sleep, a task's next poll, a retry's delay; its event says until
// when) goes on by itself, and the run is followed through it.
func waitsForAnAnswer(ev state.Event) bool {
	if ev.Type != "step.waiting" {
		return false
	}
	_, timed := ev.Data["until"]
	return !timed
}

// waitingFor says what a step.waiting event's step waits for: an
// approval, or a moment ("waiting until ...: why", the event's message).
func waitingFor(ev state.Event) string {
	if waitsForAnAnswer(ev) {
		return "waiting for approval"
	}
	return ev.Message
}

// finishRemote reports the outcome of a run the server executes, as
// finishRun does for a run executed here.
func (a *app) finishRemote(ctx context.Context, b runsBackend, id string, out *outputFlag) error {
	doc, err := docOf(ctx, b, id)
	if err != nil {
		return err
	}
	r := doc.Run
	if out.json {
		if err := writeJSON(a.stdout, doc); err != nil {
			return err
		}
		if r.Status == state.RunFailed || r.Status == state.RunCancelled {
			return errSilent(1)
		}
		return nil
	}
	if r.Status.Done() {
		// finishRun reads the store only for waiting runs and JSON.
		return a.finishRun(ctx, nil, r, nil, out)
	}
	runID, step := waitingOn(ctx, b, r.ID)
	if step == "?" {
		fmt.Fprintf(a.stdout, "run %s is %s; follow it with: runbook runs logs -f %s\n", r.ID, r.Status, r.ID)
		return nil
	}
	fmt.Fprintf(a.stdout, "run %s is waiting for approval of step %s; answer with: %s\n", r.ID, step, approveCommand(ctx, b, runID, step))
	return nil
}
