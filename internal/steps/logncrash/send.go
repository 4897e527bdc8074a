package logncrash

import (
	"context"
	"fmt"
	"sort"

	"github.com/runbook/runbook/internal/cloud/logncrash"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

type sendParams struct {
	Connection     string         `json:"connection" default:"logncrash" pattern:"^[A-Za-z][A-Za-z0-9_-]*$" desc:"name of the Log & Crash Search connection (base_url, appkey)"`
	Message        string         `json:"message" required:"true" minlen:"1" maxlen:"65536" desc:"the log text (body)"`
	Level          string         `json:"level" default:"INFO" enum:"DEBUG,INFO,WARN,ERROR,FATAL" desc:"log level"`
	ProjectVersion string         `json:"project_version" default:"1.0.0" minlen:"1" maxlen:"255" desc:"projectVersion of the log"`
	Fields         map[string]any `json:"fields" maxlen:"100" desc:"custom fields (at most 100, the collector's limit): names of letters, digits and _ (not a reserved name such as body or host); strings, numbers, booleans"`
}

func init() {
	steps.Register(steps.Define(steps.Def[sendParams]{
		Type: "logncrash.send",
		Summary: "Send one log line (with custom fields) to Log & Crash Search, as the ML SDK's logger does. " +
			"Not mutating: a resumed run may send it again, and a duplicate log line is acceptable.",
		Example: map[string]any{"message": "training finished", "level": "INFO", "project_version": "2.0.0",
			"fields": map[string]any{"training_id": "trn-1", "accuracy": 0.93}},
		Outputs: []steps.Output{{Name: "sent", Type: "boolean", Description: "always true: the collector accepted the log"}},
		Check:   checkSend,
		Run:     runSend,
		Plan: func(p *sendParams) []steps.PlannedCall {
			return []steps.PlannedCall{{Method: "POST", Path: "/v2/log", Body: map[string]any{"body": p.Message, "logLevel": p.Level, "projectVersion": p.ProjectVersion}}}
		},
	}))
}

// checkSend checks the names of the custom fields (their number is in the
// fields tag). It runs again before the send, when fields came from an
// expression.
func checkSend(p *sendParams, dynamic map[string]bool) []fault.Problem {
	if dynamic["fields"] {
		return nil
	}
	names := make([]string, 0, len(p.Fields))
	for k := range p.Fields {
		names = append(names, k)
	}
	sort.Strings(names)
	var out []fault.Problem
	for _, k := range names {
		if msg := logncrash.ValidField(k); msg != "" {
			out = append(out, fault.Problem{Path: "fields." + k, Message: msg})
		}
	}
	return out
}

func runSend(ctx context.Context, c *steps.Call, p *sendParams) (steps.Outputs, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if ps := checkSend(p, nil); len(ps) > 0 {
		return nil, fault.ProblemsError(c.StepID, ps)
	}
	conn, err := c.Host.Connection(p.Connection)
	if err != nil {
		return nil, err
	}
	cfg, err := logncrash.ConfigFrom(conn)
	if err != nil {
		return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("connection %q", p.Connection), Err: err}
	}
	cl, err := logncrash.New(cfg)
	if err != nil {
		return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("connection %q", p.Connection), Err: err}
	}
	// The SDK's logger prints the line as well as sending it.
	c.Log.Info(p.Message, "level", p.Level)
	if err := cl.Send(ctx, logncrash.Log{Message: p.Message, Level: p.Level, ProjectVersion: p.ProjectVersion, Fields: p.Fields}); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return steps.Outputs{"sent": true}, nil
}
