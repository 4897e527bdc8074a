package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/auth"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

type approvalField struct {
	Type     string `json:"type" enum:"string,integer,number,boolean" default:"string" desc:"type of the answer"`
	Required bool   `json:"required" desc:"the approver must give it"`
	Default  any    `json:"default" desc:"value when the approver leaves it out"`
}

type approvalParams struct {
	Message   string                   `json:"message" required:"true" desc:"what the approver is asked"`
	Approvers []string                 `json:"approvers" desc:"who may answer: user names or roles (role:NAME or user:NAME to be explicit); default: anyone allowed to answer runs"`
	Required  int                      `json:"required" min:"1" max:"10" default:"1" desc:"how many distinct approvers must approve; a rejection by any of them rejects"`
	AllowSelf bool                     `json:"allow_self_approval" desc:"whoever started the run (for a triggered run: the webhook or schedule) may approve it"`
	Timeout   steps.Duration           `json:"timeout" max:"8760h" desc:"answer by on_timeout when unanswered this long (default: wait forever); the deadline is fixed when the step first waits and survives a restart"`
	OnTimeout string                   `json:"on_timeout" enum:"reject,approve" default:"reject" desc:"what the timeout answers: reject fails the step with code timeout; approve approves it by \"timeout\" with the fields' defaults"`
	Fields    map[string]approvalField `json:"fields" desc:"typed values the approver fills in"`
}

// approvalCheckpoint is what approval persists: its deadline, computed once.
type approvalCheckpoint struct {
	Deadline time.Time `json:"deadline,omitzero"`
}

var fieldName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

func init() {
	steps.Register(steps.Define(steps.Def[approvalParams]{
		Type: "approval",
		Summary: "Wait, durably, until someone approves or rejects. Only a rejection (or a timeout with " +
			"on_timeout: reject) fails the step; an answer whose fields do not fit is refused and the run keeps waiting. " +
			"Typed fields carry the approver's answers.",
		Example: map[string]any{
			"message":   "Upgrade prod-1 to v1.29?",
			"approvers": []any{"alice", "bob"},
			"timeout":   "24h",
			"fields":    map[string]any{"ticket": map[string]any{"type": "string", "required": true}},
		},
		Outputs: []steps.Output{
			{Name: "approved", Type: "boolean", Description: "always true (a rejection fails the step)"},
			{Name: "by", Type: "string", Description: "who answered (\"timeout\" when approved by on_timeout); with required > 1, the last approver"},
			{Name: "approvers", Type: "list", Description: "everyone who approved, in order"},
			{Name: "comment", Type: "string", Description: "the approver's comment"},
			{Name: "fields", Type: "map", Description: "the typed answers, defaults applied"},
			{Name: "answered_at", Type: "string", Description: "when it was answered (RFC 3339)"},
			{Name: "timed_out", Type: "boolean", Description: "true when on_timeout: approve answered it"},
		},
		Check: checkApproval,
		Run:   runApproval,
	}))
}

func checkApproval(p *approvalParams, dynamic map[string]bool) []fault.Problem {
	var out []fault.Problem
	for _, name := range sortedNames(p.Fields) {
		f := p.Fields[name]
		path := "fields." + name
		if !fieldName().MatchString(name) {
			out = append(out, fault.Problem{Path: "fields", Message: fmt.Sprintf("field name %q must be a letter or _ followed by letters, digits or _", name)})
			continue
		}
		if f.Default != nil {
			if _, ok := f.Default.(steps.Dynamic); ok {
				continue
			}
			if _, err := steps.ConvertField(f.Type, f.Default); err != nil {
				out = append(out, fault.Problem{Path: path + ".default", Message: err.Error()})
			}
		}
		if p.OnTimeout == "approve" && f.Required && f.Default == nil {
			out = append(out, fault.Problem{Path: path, Message: "a required field needs a default when on_timeout is approve"})
		}
	}
	if p.OnTimeout == "approve" && p.Timeout == 0 && !dynamic["timeout"] {
		out = append(out, fault.Problem{Path: "on_timeout", Message: "on_timeout needs a timeout"})
	}
	return out
}

func runApproval(ctx context.Context, c *steps.Call, p *approvalParams) (steps.Outputs, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var cp approvalCheckpoint
	if c.Resume == nil || json.Unmarshal(c.Resume, &cp) != nil {
		cp = approvalCheckpoint{}
		if p.Timeout > 0 {
			cp.Deadline = c.Now().Add(p.Timeout.Std()).UTC()
			b, _ := json.Marshal(cp)
			if err := c.Host.Checkpoint(ctx, b); err != nil {
				return nil, fmt.Errorf("approval: checkpoint: %w", err)
			}
		}
	}
	req := steps.ApprovalRequest{Message: p.Message, Approvers: p.Approvers, Deadline: cp.Deadline, Required: p.Required, AllowSelfApproval: p.AllowSelf}
	if len(p.Fields) > 0 {
		req.Fields = make(map[string]steps.Field, len(p.Fields))
		for name, f := range p.Fields {
			req.Fields[name] = steps.Field{Type: f.Type, Required: f.Required, Default: f.Default}
		}
	}
	resp, err := c.Host.AwaitApproval(ctx, req)
	if err != nil {
		// ErrSuspended passes through unchanged: the engine parks the run.
		// A host timeout is a *fault.Error with code Timeout: it fails the
		// step unless on_timeout approves.
		var se *fault.Error
		if p.OnTimeout != "approve" || !errors.As(err, &se) || se.Code != fault.Timeout || cp.Deadline.IsZero() {
			return nil, err
		}
		fields, problems := steps.CheckAnswer(req.Fields, nil)
		if len(problems) > 0 {
			return nil, &fault.Error{Code: fault.Invalid, Message: "approval on timeout: " + strings.Join(problems, "; ")}
		}
		return steps.Outputs{
			"approved":    true,
			"by":          "timeout",
			"approvers":   []string{},
			"comment":     "approved on timeout (on_timeout: approve)",
			"fields":      fields,
			"answered_at": cp.Deadline.UTC().Format(time.RFC3339),
			"timed_out":   true,
		}, nil
	}
	if len(p.Approvers) > 0 && !slices.ContainsFunc(p.Approvers, func(e string) bool { return auth.MatchesApprover(e, resp.By, resp.Roles) }) {
		return nil, &fault.Error{Code: fault.Unauthorized,
			Message: fmt.Sprintf("answered by %q, who is not one of the approvers (%s)", resp.By, strings.Join(p.Approvers, ", "))}
	}
	if resp.Approved && len(resp.Approvers) > 0 && len(resp.Approvers) < max(p.Required, 1) {
		return nil, &fault.Error{Code: fault.Unauthorized,
			Message: fmt.Sprintf("approved by %s only: %d distinct approvers are required", strings.Join(resp.Approvers, ", "), p.Required)}
	}
	if !resp.Approved {
		msg := "rejected by " + orUnknown(resp.By)
		if resp.Comment != "" {
			msg += ": " + resp.Comment
		}
		return nil, &fault.Error{Code: fault.Failed, Message: msg, Data: map[string]any{"by": resp.By, "comment": resp.Comment}}
	}
	fields, problems := steps.CheckAnswer(req.Fields, resp.Fields)
	if len(problems) > 0 {
		return nil, &fault.Error{Code: fault.Invalid, Message: "approval answer: " + strings.Join(problems, "; ")}
	}
	at := resp.At
	if at.IsZero() {
		at = c.Now()
	}
	if resp.Approvers == nil {
		resp.Approvers = []string{resp.By}
	}
	return steps.Outputs{
		"approved":    true,
		"by":          resp.By,
		"approvers":   resp.Approvers,
		"comment":     resp.Comment,
		"fields":      fields,
		"answered_at": at.UTC().Format(time.RFC3339),
		"timed_out":   false,
	}, nil
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func orUnknown(s string) string {
	if s == "" {
		return "an unknown approver"
	}
	return s
}
