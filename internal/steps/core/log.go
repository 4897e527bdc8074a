package core

import (
	"context"
	"log/slog"
	"sort"

	"github.com/runbook/runbook/internal/steps"
)

type logParams struct {
	Message string         `json:"message" required:"true" desc:"the line to log"`
	Level   string         `json:"level" enum:"debug,info,warn,error" default:"info" desc:"log level"`
	Fields  map[string]any `json:"fields" desc:"structured attributes added to the line"`
}

func init() {
	steps.Register(steps.Define(steps.Def[logParams]{
		Type:    "log",
		Summary: "Write a line to the run log.",
		Example: map[string]any{"message": "upgrade finished", "level": "warn", "fields": map[string]any{"cluster": "prod-1", "groups": 3}},
		Pure:    true,
		Outputs: []steps.Output{{Name: "message", Type: "string", Description: "the message logged"}},
		Run:     runLog,
	}))
}

var logLevels = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}

func runLog(ctx context.Context, c *steps.Call, p *logParams) (steps.Outputs, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(p.Fields))
	for k := range p.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	attrs := make([]slog.Attr, 0, len(keys))
	for _, k := range keys {
		attrs = append(attrs, slog.Any(k, p.Fields[k]))
	}
	if c.Log != nil {
		c.Log.LogAttrs(ctx, logLevels[p.Level], p.Message, attrs...)
	}
	return steps.Outputs{"message": p.Message}, nil
}
