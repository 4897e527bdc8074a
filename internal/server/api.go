package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/jsonvalue"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/runner"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/suggest"
	"github.com/runbook/runbook/internal/trigger"
)

// maxAPIBody caps a JSON request body of the API.
const maxAPIBody = 1 << 20

// routes builds the handler: the API under /api/v1 (bearer token),
// webhooks under /hooks/ (their own signature), /healthz, /readyz and
// /metrics.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/hooks/", s.countDeliveries(s.logDeliveries(s.intake)))
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /metrics", s.metricsAuth(s.metrics.handler))

	api := http.NewServeMux()
	api.HandleFunc("GET /api/v1/playbooks", s.listPlaybooks)
	api.HandleFunc("GET /api/v1/playbooks/{name}", s.showPlaybook)
	api.HandleFunc("POST /api/v1/playbooks/{name}/runs", s.startRun)
	api.HandleFunc("GET /api/v1/runs", s.listRuns)
	api.HandleFunc("GET /api/v1/runs/{id}", s.showRun)
	api.HandleFunc("GET /api/v1/runs/{id}/events", s.runEvents)
	api.HandleFunc("GET /api/v1/runs/{id}/logs", s.streamLogs)
	api.HandleFunc("GET /api/v1/runs/{id}/output", s.runOutput)
	api.HandleFunc("POST /api/v1/runs/{id}/cancel", s.cancelRun)
	api.HandleFunc("POST /api/v1/runs/{id}/approve", s.approveRun)
	api.HandleFunc("POST /api/v1/runs/{id}/retry", s.retryRun)
	api.HandleFunc("POST /api/v1/runs/{id}/resume", s.resumeRun)
	api.HandleFunc("POST /api/v1/runs/{id}/rerun", s.rerunRun)
	api.HandleFunc("POST /api/v1/reload", s.reload)
	api.HandleFunc("GET /api/v1/notifications", s.listNotifications)
	api.HandleFunc("GET /api/v1/state/backup", s.backupState)
	api.HandleFunc("POST /api/v1/playbooks/{name}/schedules/pause", s.pauseSchedules)
	api.HandleFunc("POST /api/v1/playbooks/{name}/schedules/resume", s.resumeSchedules)
	api.HandleFunc("POST /api/v1/playbooks/{name}/schedules/run", s.runSchedule)
	api.HandleFunc("POST /api/v1/playbooks/{name}/schedules/backfill", s.backfillSchedule)
	api.HandleFunc("GET /api/v1/pauses", s.listPauses)
	api.HandleFunc("POST /api/v1/pauses", s.pauseRuns)
	api.HandleFunc("DELETE /api/v1/pauses/{id}", s.resumeRuns)
	api.HandleFunc("POST /api/v1/agent/register", s.agentRegister)
	api.HandleFunc("POST /api/v1/agent/poll", s.agentPoll)
	api.HandleFunc("POST /api/v1/agent/assignments/{id}/lines", s.agentLines)
	api.HandleFunc("POST /api/v1/agent/assignments/{id}/host", s.agentHost)
	api.HandleFunc("POST /api/v1/agent/assignments/{id}/result", s.agentResult)
	api.HandleFunc("GET /api/v1/agents", s.listAgents)
	api.HandleFunc("GET /api/v1/drain", s.drainStatus)
	api.HandleFunc("POST /api/v1/drain", s.drainRequest)
	s.authRoutes(api)
	api.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fault.NotFound, fmt.Sprintf("no API route %s %s (see docs/api.md)", r.Method, r.URL.Path))
	})
	mux.Handle("/api/", s.authenticate(api))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fault.NotFound, fmt.Sprintf("no route %s (the API is under /api/v1, webhooks under /hooks/)", r.URL.Path))
	})
	return mux
}

// writeError answers with an api.ErrorBody, the same shape as the webhook
// intake's error answers.
func writeError(w http.ResponseWriter, status int, code fault.Code, msg string, problems ...string) {
	writeJSON(w, status, api.ErrorBody{Error: msg, Code: string(code), Problems: problems})
}

// writeErr answers err with the status of its code.
func writeErr(w http.ResponseWriter, err error) {
	code := fault.CodeOf(err)
	if code == "" {
		code = fault.Internal
	}
	writeError(w, fault.HTTPStatus(err), code, err.Error())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encoding the answer failed","code":"internal"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// decodeBody reads a JSON request body into v. An empty body leaves v
// unchanged.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if r.ContentLength == 0 && r.Header.Get("Content-Type") == "" {
		return true
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			writeError(w, http.StatusUnsupportedMediaType, fault.Invalid, fmt.Sprintf("Content-Type %q is not application/json", ct))
			return false
		}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxAPIBody+1))
	if err != nil {
		writeError(w, http.StatusBadRequest, fault.Invalid, "reading the body failed: "+err.Error())
		return false
	}
	if len(body) > maxAPIBody {
		writeError(w, http.StatusRequestEntityTooLarge, fault.Invalid, fmt.Sprintf("body is larger than %d bytes", maxAPIBody))
		return false
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return true
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, fault.Invalid, "malformed JSON body: "+err.Error())
		return false
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, fault.Invalid, "malformed JSON body: more than one value")
		return false
	}
	return true
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	loadedAt, failed := s.cat.status()
	body := api.Health{Status: "ok", Playbooks: len(s.cat.all()), RunsExecuting: s.runs.Running(), LoadedAt: loadedAt.UTC().Format(time.RFC3339)}
	if failed != nil {
		body.ReloadProblems = len(failed.Problems)
	}
	writeJSON(w, http.StatusOK, body)
}

// readyz answers 200 while the server takes requests and 503 from the
// moment it starts shutting down (the webhooks in flight finish, new ones
// get 503), so that a load balancer stops sending to it first.
func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	if s.draining.Load() {
		writeJSON(w, http.StatusServiceUnavailable, api.Ready{Status: "draining"})
		return
	}
	writeJSON(w, http.StatusOK, api.Ready{Status: "ok"})
}

// countDeliveries records each webhook answer in the metrics.
func (s *Server) countDeliveries(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, rep := deliveryReport(r)
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		if rec.status/100 == 2 {
			// The intake accepts only a delivery whose signature it
			// verified: its sender's connection is authenticated.
			authenticated(r.Context())
		}
		route := strings.TrimPrefix(r.URL.Path, "/hooks/")
		outcome := strconv.Itoa(rec.status)
		if rec.status == http.StatusOK {
			outcome = "accepted"
			if rep.Answer.Status == "duplicate" {
				outcome = "duplicate"
			}
		}
		if rec.status == http.StatusNotFound {
			route = "" // unknown routes must not grow the label set
		}
		s.metrics.delivery(route, outcome)
		s.refusedDelivery(route, rec.status)
	})
}

// deliveryReport returns r with the intake's report in its context (the
// one a handler before put there, else a new one), and the report: what
// the intake parsed and answered, read instead of the answer's text.
func deliveryReport(r *http.Request) (*http.Request, *trigger.Report) {
	ctx, rep := trigger.WithReport(r.Context())
	if ctx != r.Context() {
		r = r.WithContext(ctx)
	}
	return r, rep
}

// statusRecorder keeps the status of an answer.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// --- playbooks ---

// viewPlaybook is pb as the API shows it; detail adds its steps and the
// next fire times of its schedules.
func (s *Server) viewPlaybook(pb *playbook.Playbook, detail bool) api.Playbook {
	v := api.Playbook{Name: pb.Name, Description: pb.Description, File: pb.Path, Hash: pb.Hash,
		Inputs: []api.Input{}, Triggers: []api.Trigger{}, Active: s.runs.Active(pb.Name)}
	if v.Active == nil {
		v.Active = []string{}
	}
	v.Paused = s.pauseOf(pb)
	for _, in := range pb.Inputs {
		iv := api.Input{Name: in.Name, Type: in.Type, Required: in.Required, Enum: in.Enum, Description: in.Description, Secret: in.Secret}
		if in.HasDefault && !in.Secret {
			iv.Default = in.Default
		}
		v.Inputs = append(v.Inputs, iv)
	}
	for _, t := range pb.Triggers {
		switch {
		case t.Schedule != nil:
			tv := api.Trigger{Type: "schedule", Cron: t.Schedule.Cron, Timezone: t.Schedule.Timezone, Overlap: t.Schedule.Overlap}
			if detail {
				if next, err := nextSlots(t.Schedule, 3); err == nil {
					tv.Next = next
				}
			}
			v.Triggers = append(v.Triggers, tv)
		case t.Webhook != nil:
			v.Triggers = append(v.Triggers, api.Trigger{Type: "webhook", Route: t.Webhook.Route, Events: t.Webhook.Events, Each: t.Webhook.Each})
		}
	}
	if detail {
		for _, st := range pb.Steps {
			v.Steps = append(v.Steps, api.PlaybookStep{ID: st.ID, Uses: st.Uses, Name: st.Name})
		}
	}
	return v
}

func (s *Server) listPlaybooks(w http.ResponseWriter, r *http.Request) {
	out := api.PlaybookList{Playbooks: []api.Playbook{}}
	for _, pb := range s.cat.all() {
		if !visible(r, pb.Name) {
			continue
		}
		out.Playbooks = append(out.Playbooks, s.viewPlaybook(pb, false))
	}
	loadedAt, failed := s.cat.status()
	out.LoadedAt = loadedAt.UTC()
	if failed != nil {
		out.ReloadProblems = failed.Problems
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) playbookOr404(w http.ResponseWriter, name string) *playbook.Playbook {
	pb := s.findPlaybook(name)
	if pb == nil {
		msg := fmt.Sprintf("no playbook %q", name) + suggest.Hint(name, s.cat.names())
		writeError(w, http.StatusNotFound, fault.NotFound, msg)
	}
	return pb
}

func (s *Server) showPlaybook(w http.ResponseWriter, r *http.Request) {
	pb := s.playbookOr404(w, r.PathValue("name"))
	if pb == nil {
		return
	}
	writeJSON(w, http.StatusOK, s.viewPlaybook(pb, true))
}

func (s *Server) reload(w http.ResponseWriter, _ *http.Request) {
	if err := s.Reload(); err != nil {
		var le *loadError
		if errors.As(err, &le) {
			writeError(w, http.StatusUnprocessableEntity, fault.Invalid, "reload refused: the playbooks in use are kept", le.Problems...)
			return
		}
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.ReloadAnswer{Status: "ok", Playbooks: len(s.cat.all())})
}

// --- runs ---

// viewRun is r as the API shows it, without its steps: interrupted when
// the process that executed it is gone (engine.Shown), with the command
// that continues it.
func (s *Server) viewRun(r *state.Run) api.Run {
	return s.viewShown(engine.Shown(s.store, r, s.executing))
}

// viewShown is viewRun of a run already as shown (engine.ListShown).
func (s *Server) viewShown(r *state.Run) api.Run {
	v := api.Run{Run: r, RerunOf: r.RerunOf()}
	v.Executing, v.Parked = s.runs.Holding(r.ID)
	if v.Status == state.RunInterrupted {
		v.Hint = engine.ResumeHint(r.ID)
	}
	return v
}

// executing reports whether this server executes run id (a sub-playbook
// run executes within its parent's).
func (s *Server) executing(id string) bool {
	return s.runs.Holds(id) || s.eng.Executing(id)
}

func (s *Server) startRun(w http.ResponseWriter, r *http.Request) {
	pb := s.playbookOr404(w, r.PathValue("name"))
	if pb == nil {
		return
	}
	var body api.StartRequest
	if !decodeBody(w, r, &body) {
		return
	}
	inputs, err := jsonvalue.Normalize(body.Inputs)
	if err != nil {
		writeError(w, http.StatusBadRequest, fault.Invalid, "inputs: "+err.Error())
		return
	}
	m, _ := inputs.(map[string]any)
	if !s.preflightOr422(w, r, pb, m) {
		return
	}
	req := engine.StartRequest{Inputs: m, Trigger: map[string]any{"type": "api", "by": callerName(r)}}
	var run *state.Run
	replayed := false
	if key := r.Header.Get("Idempotency-Key"); key != "" {
		run, replayed, err = s.startRunOnce(r, pb, req, key)
	} else {
		run, err = s.runs.StartRun(r.Context(), pb, req)
	}
	if err != nil {
		if errors.Is(err, runner.ErrShuttingDown) || errors.Is(err, runner.ErrDraining) {
			writeError(w, http.StatusServiceUnavailable, fault.Unavailable, err.Error())
			return
		}
		writeErr(w, err)
		return
	}
	noteAudit(r, "run", run.ID)
	w.Header().Set("Location", "/api/v1/runs/"+run.ID)
	status := http.StatusCreated
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
		status = http.StatusOK
	}
	writeJSON(w, status, s.viewRun(run))
}

// idempotencyTTL is how long an Idempotency-Key of a run start is
// remembered: a start sent again within it answers the run the first
// one started.
const idempotencyTTL = 24 * time.Hour

// maxIdempotencyKey bounds an Idempotency-Key's length.
const maxIdempotencyKey = 255

// startRunOnce starts a run of pb once per Idempotency-Key key of the
// caller: the run is committed with the key in one transaction (as a
// webhook delivery is, state.Store.CommitDelivery), so a start sent again
// — its answer lost to a dropped connection or a replica killed before it
// replied — returns the run the first one started (replayed) instead of
// starting a second run.
func (s *Server) startRunOnce(r *http.Request, pb *playbook.Playbook, req engine.StartRequest, key string) (run *state.Run, replayed bool, err error) {
	if len(key) > maxIdempotencyKey || strings.ContainsFunc(key, func(c rune) bool { return c < 0x21 || c > 0x7e }) {
		return nil, false, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("Idempotency-Key must be 1 to %d printable ASCII characters without spaces", maxIdempotencyKey)}
	}
	run, evs, err := s.runs.Prepare(r.Context(), trigger.StartRequest{Playbook: pb, Inputs: req.Inputs, Trigger: req.Trigger})
	if err != nil {
		return nil, false, err
	}
	res, err := s.store.CommitDelivery(r.Context(), state.Delivery{
		Key: "api-start\n" + callerName(r) + "\n" + pb.Name + "\n" + key, TTL: idempotencyTTL,
		Units: []state.DeliveryUnit{{Run: run, Events: evs}},
		Done:  func(created []string, _ [][]byte) []byte { return []byte(strings.Join(created, ",")) },
	})
	switch {
	case err != nil:
		return nil, false, err
	case res.Duplicate:
		first, err := s.store.GetRun(r.Context(), string(res.Value))
		return first, true, err
	}
	committed := *run // the executor writes run from the launch on
	s.runs.Launch(run)
	return &committed, false, nil
}

// listRuns answers GET /api/v1/runs (and /runs/page, its alias): runs
// newest first as shown (engine.ListShown), of the playbooks the caller
// may see, filtered by api.RunQuery, one page at a time.
func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	q, err := api.ParseRunQuery(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, fault.Invalid, err.Error())
		return
	}
	children := q.Children || q.Parent != ""
	l := engine.Listing{
		RunFilter: state.RunFilter{Status: q.Status, Playbook: q.Playbook, ParentID: q.Parent, Before: q.Before, Limit: q.Limit},
		Since:     q.Since, Until: q.Until, Executing: s.executing,
		Keep: func(run *state.Run) bool {
			return (children || run.ParentID == "") && strings.HasPrefix(run.ID, q.Prefix) &&
				(len(q.Triggers) == 0 || slices.Contains(q.Triggers, triggerType(run))) && visible(r, run.Playbook)
		},
	}
	runs, next, err := engine.ListShown(r.Context(), s.store, l)
	if err != nil {
		writeErr(w, err)
		return
	}
	out := api.RunList{Runs: make([]api.Run, 0, len(runs))}
	for _, run := range runs {
		out.Runs = append(out.Runs, s.viewShown(run)) // ListShown showed it
	}
	if next != nil {
		out.Next = next.String()
	}
	writeJSON(w, http.StatusOK, out)
}

// triggerType is the type of what started run: api, schedule, webhook.
func triggerType(run *state.Run) string {
	typ, _ := run.Trigger["type"].(string)
	return typ
}

func (s *Server) runOr404(w http.ResponseWriter, r *http.Request) *state.Run {
	id := r.PathValue("id")
	run, err := s.store.GetRun(r.Context(), id)
	if errors.Is(err, state.ErrNotFound) {
		writeError(w, http.StatusNotFound, fault.NotFound, fmt.Sprintf("no run %q", id))
		return nil
	}
	if err != nil {
		writeErr(w, err)
		return nil
	}
	if !s.inScope(w, r, run.Playbook) {
		return nil
	}
	return run
}

func (s *Server) showRun(w http.ResponseWriter, r *http.Request) {
	run := s.runOr404(w, r)
	if run == nil {
		return
	}
	recs, err := s.store.Steps(r.Context(), run.ID)
	if err != nil {
		writeErr(w, err)
		return
	}
	if run.Trigger, err = state.ResolveTrigger(r.Context(), s.store, run); err != nil {
		writeErr(w, err)
		return
	}
	v := s.viewRun(run)
	v.Steps = []api.RunStep{}
	for _, rec := range recs {
		v.Steps = append(v.Steps, api.RunStep{StepRecord: rec})
		if rec.Status == state.StepWaiting && rec.WakeAt.IsZero() && v.WaitingFor == nil {
			v.WaitingFor = &api.WaitingFor{Step: rec.ID}
		}
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) runEvents(w http.ResponseWriter, r *http.Request) {
	run := s.runOr404(w, r)
	if run == nil {
		return
	}
	after, limit, ok := pageParams(w, r)
	if !ok {
		return
	}
	evs, err := s.store.Events(r.Context(), run.ID, after, limit)
	if err != nil {
		writeErr(w, err)
		return
	}
	if evs == nil {
		evs = []state.Event{}
	}
	writeJSON(w, http.StatusOK, api.EventPage{Events: evs, Status: run.Status})
}

func pageParams(w http.ResponseWriter, r *http.Request) (after uint64, limit int, ok bool) {
	q := r.URL.Query()
	limit = 1000
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, fault.Invalid, "after must be an event sequence number")
			return 0, 0, false
		}
		after = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			writeError(w, http.StatusBadRequest, fault.Invalid, "limit must be an integer in 1..10000")
			return 0, 0, false
		}
		limit = n
	}
	return after, limit, true
}

func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) {
	run := s.runOr404(w, r)
	if run == nil {
		return
	}
	if run.Status.Done() {
		writeError(w, http.StatusConflict, fault.Conflict, fmt.Sprintf("run %s is already %s", run.ID, run.Status))
		return
	}
	by := "api"
	if v := r.URL.Query().Get("by"); v != "" {
		by = v
	}
	if !s.runs.CancelRun(run.ID, &fault.Error{Code: fault.Cancelled, Message: "cancelled by " + by}) {
		// Not executing here (pending behind a queue that has not started
		// it, or its snapshot failed to load): record the cancellation.
		run.Status, run.EndedAt = state.RunCancelled, time.Now()
		run.Error = &state.ErrorRecord{Code: string(fault.Cancelled), Message: "run cancelled"}
		ev := state.Event{Type: "run.cancelled", Message: "run cancelled by " + by}
		if err := s.store.SaveRun(r.Context(), run, ev); err != nil {
			var ended *state.EndedMeanwhileError
			if errors.As(err, &ended) { // it ended on another replica since it was read
				writeError(w, http.StatusConflict, fault.Conflict, ended.Error())
				return
			}
			writeErr(w, err)
			return
		}
		s.metrics.observe(run.ID, ev)
		s.observeNotify(run.ID, ev)
	}
	writeJSON(w, http.StatusAccepted, api.CancelAnswer{ID: run.ID, Status: "cancelling"})
}

func (s *Server) approveRun(w http.ResponseWriter, r *http.Request) {
	run := s.runOr404(w, r)
	if run == nil {
		return
	}
	var body api.ApproveRequest
	if !decodeBody(w, r, &body) {
		return
	}
	if body.Approve == nil {
		writeError(w, http.StatusBadRequest, fault.Invalid, `"approve" (true or false) is required`)
		return
	}
	if body.Step == "" {
		step, err := s.waitingStep(r.Context(), run.ID)
		if err != nil {
			writeErr(w, err)
			return
		}
		body.Step = step
	}
	by, roles, ok := s.answerer(w, r, body.By)
	if !ok {
		return
	}
	noteAudit(r, "step", body.Step)
	noteAudit(r, "approved", *body.Approve)
	noteAudit(r, "by", by)
	norm, err := jsonvalue.Normalize(body.Fields)
	if err != nil {
		writeError(w, http.StatusBadRequest, fault.Invalid, "fields: "+err.Error())
		return
	}
	fields, _ := norm.(map[string]any)
	a := state.Approval{Approved: *body.Approve, By: by, Roles: roles, Comment: body.Comment, Fields: fields}
	if err := s.runs.Approve(r.Context(), run.ID, body.Step, a); err != nil {
		// An answer that does not fit the step's fields: 400 with every
		// problem; the run keeps waiting.
		var se *fault.Error
		if ps, ok := problemsOf(err, &se); ok {
			writeError(w, fault.HTTPStatus(err), se.Code, se.Message, ps...)
			return
		}
		if fault.CodeOf(err) == fault.Unauthorized {
			// The token is good; its bearer may not answer this step.
			writeError(w, http.StatusForbidden, fault.Unauthorized, err.Error())
			return
		}
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.ApproveAnswer{ID: run.ID, Step: body.Step, Approved: *body.Approve})
}

// problemsOf returns the problems listed in the Data of err's *fault.Error.
func problemsOf(err error, se **fault.Error) ([]string, bool) {
	if !errors.As(err, se) {
		return nil, false
	}
	ps, ok := (*se).Data["problems"].([]string)
	return ps, ok && len(ps) > 0
}

// waitingStep finds the one approval step a run waits on.
func (s *Server) waitingStep(ctx context.Context, runID string) (string, error) {
	recs, err := s.store.Steps(ctx, runID)
	if err != nil {
		return "", err
	}
	var waiting []string
	for _, rec := range recs {
		if rec.Status == state.StepWaiting && rec.WakeAt.IsZero() { // not parked until a moment (a sleep)
			waiting = append(waiting, rec.ID)
		}
	}
	switch len(waiting) {
	case 0:
		return "", &fault.Error{Code: fault.Conflict, Message: fmt.Sprintf("run %s is not waiting for an approval", runID)}
	case 1:
		return waiting[0], nil
	}
	return "", &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("run %s waits on several approvals (%s); name one with \"step\"", runID, strings.Join(waiting, ", "))}
}

// resumeRun continues an unfinished run (cancelled, or left by a process
// that stopped) in this server, from where it stopped.
func (s *Server) resumeRun(w http.ResponseWriter, r *http.Request) {
	run := s.runOr404(w, r)
	if run == nil {
		return
	}
	var body api.ResumeRequest
	if !decodeBody(w, r, &body) {
		return
	}
	if err := s.runs.Resume(r.Context(), run, body.Inputs); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, api.ResumeAnswer{ID: run.ID, Status: "resuming"})
}

func (s *Server) retryRun(w http.ResponseWriter, r *http.Request) {
	run := s.runOr404(w, r)
	if run == nil {
		return
	}
	var body api.RetryRequest
	if !decodeBody(w, r, &body) {
		return
	}
	next, err := s.runs.Retry(r.Context(), run.ID, body.From, body.Inputs, callerName(r))
	if err != nil {
		writeErr(w, err)
		return
	}
	noteAudit(r, "run", next.ID)
	w.Header().Set("Location", "/api/v1/runs/"+next.ID)
	writeJSON(w, http.StatusCreated, s.viewRun(next))
}

// rerunRun answers POST /api/v1/runs/{id}/rerun: a new run of the ended
// run's playbook snapshot with its inputs (its secret ones given again)
// and trigger, recorded as a rerun of it by the caller (engine.Rerun),
// started as any run this server starts.
func (s *Server) rerunRun(w http.ResponseWriter, r *http.Request) {
	old := s.runOr404(w, r)
	if old == nil {
		return
	}
	var body api.RerunRequest
	if !decodeBody(w, r, &body) {
		return
	}
	given, err := jsonvalue.Normalize(body.Inputs)
	if err != nil {
		writeError(w, http.StatusBadRequest, fault.Invalid, "inputs: "+err.Error())
		return
	}
	secretInputs, _ := given.(map[string]any)
	pb, req, err := s.eng.Rerun(r.Context(), old.ID, secretInputs, callerName(r))
	if err != nil {
		writeErr(w, err)
		return
	}
	run, err := s.runs.StartRun(r.Context(), pb, req)
	if err != nil {
		writeStartErr(w, err)
		return
	}
	noteAudit(r, "run", run.ID)
	w.Header().Set("Location", "/api/v1/runs/"+run.ID)
	writeJSON(w, http.StatusCreated, s.viewRun(run))
}
