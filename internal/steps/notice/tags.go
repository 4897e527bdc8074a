package notice

import (
	"context"

	"github.com/runbook/runbook/internal/steps"
)

func init() {
	steps.Register(steps.Define(steps.Def[connParams]{
		Type:    "notice.tags",
		Summary: "List the help center's notice tags.",
		Example: map[string]any{"language": "ja"},
		Outputs: []steps.Output{
			{Name: "tags", Type: "list", Description: "tags: {id, name, languages}"},
			{Name: "count", Type: "integer", Description: "number of tags"},
		},
		Plan: func(*connParams) []steps.PlannedCall {
			return []steps.PlannedCall{{Method: "GET", Path: "/{serviceId}/api/v2/notice/tags.json"}}
		},
		Run: runTags,
	}))
}

func runTags(ctx context.Context, c *steps.Call, p *connParams) (steps.Outputs, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cl, err := openClient(c, p.Connection)
	if err != nil {
		return nil, err
	}
	ts, err := cl.Tags(ctx, p.Language)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(ts))
	for i, t := range ts {
		out[i] = map[string]any{"id": t.TagID, "name": t.Tag, "languages": stringMap(t.Languages)}
	}
	return steps.Outputs{"tags": out, "count": len(out)}, nil
}
