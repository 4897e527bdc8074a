package core

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/steps"
)

type approvalField struct {
	Type     string `json:"type" enum:"string,integer,number,boolean" default:"string" desc:"type of the answer"`
	Required bool   `json:"required" desc:"the approver must give it"`
	Default  any    `json:"default" desc:"value when the approver leaves it out"`
}

type approvalParams struct {
	Message   string                   `json:"message" required:"true" desc:"what the approver is asked"`
	Approvers []string                 `json:"approvers" desc:"who may answer (default: anyone allowed to answer runs)"`
	Timeout   steps.Duration           `json:"timeout" max:"8760h" desc:"fail with code timeout when unanswered this long (default: wait forever)"`
	Fields    map[string]approvalField `json:"fields" desc:"typed values the approver fills in"`
}

// approvalCheckpoint is what approval persists: its deadline, computed once.
type approvalCheckpoint struct {
	Deadline time.Time `json:"deadline,omitzero"`
}

var fieldName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func init() {
	steps.Register(steps.Descriptor{
		Type: "approval",
		Summary: "Wait, durably, until someone approves or rejects. A rejection fails the step; " +
			"typed fields carry the approver's answers.",
		Params: approvalParams{},
		Outputs: []steps.Output{
			{Name: "approved", Type: "boolean", Description: "always true (a rejection fails the step)"},
			{Name: "by", Type: "string", Description: "who answered"},
			{Name: "comment", Type: "string", Description: "the approver's comment"},
			{Name: "fields", Type: "map", Description: "the typed answers, defaults applied"},
			{Name: "answered_at", Type: "string", Description: "when it was answered (RFC 3339)"},
		},
		Check: checkApproval,
		Run:   steps.Typed(runApproval),
	})
}

func checkApproval(params any, dynamic map[string]bool) []steps.Problem {
	p := params.(*approvalParams)
	var out []steps.Problem
	for _, name := range sortedNames(p.Fields) {
		f := p.Fields[name]
		path := "fields." + name
		if !fieldName.MatchString(name) {
			out = append(out, steps.Problem{Path: "fields", Message: fmt.Sprintf("field name %q must be a letter or _ followed by letters, digits or _", name)})
			continue
		}
		if f.Default != nil {
			if _, ok := f.Default.(steps.Dynamic); ok {
				continue
			}
			if _, err := convertField(f.Type, f.Default); err != nil {
				out = append(out, steps.Problem{Path: path + ".default", Message: err.Error()})
			}
		}
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
	req := steps.ApprovalRequest{Message: p.Message, Approvers: p.Approvers, Deadline: cp.Deadline}
	if len(p.Fields) > 0 {
		req.Fields = make(map[string]steps.Field, len(p.Fields))
		for name, f := range p.Fields {
			req.Fields[name] = steps.Field{Type: f.Type, Required: f.Required, Default: f.Default}
		}
	}
	resp, err := c.Host.AwaitApproval(ctx, req)
	if err != nil {
		// ErrSuspended passes through unchanged: the engine parks the run.
		// A host timeout is already a *steps.Error with code Timeout.
		return nil, err
	}
	if len(p.Approvers) > 0 && !contains(p.Approvers, resp.By) {
		return nil, &steps.Error{Code: steps.Unauthorized,
			Message: fmt.Sprintf("answered by %q, who is not one of the approvers (%s)", resp.By, strings.Join(p.Approvers, ", "))}
	}
	if !resp.Approved {
		msg := "rejected by " + orUnknown(resp.By)
		if resp.Comment != "" {
			msg += ": " + resp.Comment
		}
		return nil, &steps.Error{Code: steps.Failed, Message: msg, Data: map[string]any{"by": resp.By, "comment": resp.Comment}}
	}
	fields, problems := answerFields(p.Fields, resp.Fields)
	if len(problems) > 0 {
		return nil, &steps.Error{Code: steps.Invalid, Message: "approval answer: " + strings.Join(problems, "; ")}
	}
	at := resp.At
	if at.IsZero() {
		at = c.Now()
	}
	return steps.Outputs{
		"approved":    true,
		"by":          resp.By,
		"comment":     resp.Comment,
		"fields":      fields,
		"answered_at": at.UTC().Format(time.RFC3339),
	}, nil
}

// answerFields checks the answered values against the declared fields and
// applies defaults. Every problem is reported.
func answerFields(decl map[string]approvalField, got map[string]any) (map[string]any, []string) {
	out := make(map[string]any, len(decl))
	var problems []string
	for _, name := range sortedNames(decl) {
		f := decl[name]
		v, ok := got[name]
		if !ok || v == nil {
			switch {
			case f.Default != nil:
				v = f.Default
			case f.Required:
				problems = append(problems, fmt.Sprintf("field %s is required", name))
				continue
			default:
				out[name] = nil
				continue
			}
		}
		cv, err := convertField(f.Type, v)
		if err != nil {
			problems = append(problems, fmt.Sprintf("field %s %s", name, err))
			continue
		}
		out[name] = cv
	}
	var unknown []string
	for name := range got {
		if _, ok := decl[name]; !ok {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	for _, name := range unknown {
		problems = append(problems, fmt.Sprintf("unknown field %q", name))
	}
	return out, problems
}

// convertField checks v against a field type. Integers arrive as int from
// YAML and CLI parsing and as float64 from JSON; both are accepted when
// integral.
func convertField(typ string, v any) (any, error) {
	switch typ {
	case "string":
		if s, ok := v.(string); ok {
			return s, nil
		}
	case "boolean":
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case "integer":
		switch n := v.(type) {
		case int:
			return int64(n), nil
		case int64:
			return n, nil
		case float64:
			if n == float64(int64(n)) {
				return int64(n), nil
			}
		}
	case "number":
		switch n := v.(type) {
		case int:
			return float64(n), nil
		case int64:
			return float64(n), nil
		case float64:
			return n, nil
		}
	}
	article := "a"
	if typ == "integer" {
		article = "an"
	}
	return nil, fmt.Errorf("must be %s %s (got %s)", article, typ, describeAnswer(v))
}

func describeAnswer(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("string %q", x)
	case bool:
		return fmt.Sprintf("boolean %t", x)
	case int, int64:
		return fmt.Sprintf("integer %d", x)
	case float64:
		return fmt.Sprintf("number %g", x)
	}
	return fmt.Sprintf("%T", v)
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
