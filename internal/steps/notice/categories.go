package notice

import (
	"context"

	"github.com/runbook/runbook/internal/steps"
)

// connParams name the connection and the language of a read.
type connParams struct {
	Connection string `json:"connection" default:"helpcenter" pattern:"^[A-Za-z][A-Za-z0-9_-]*$" desc:"name of the help-center connection"`
	Language   string `json:"language" pattern:"^[a-z]{2}([-_][A-Za-z]{2,4})?$" desc:"language code (ko, en, ja, zh, th); default: the connection's"`
}

func init() {
	steps.Register(steps.Define(steps.Def[connParams]{
		Type:    "notice.categories",
		Summary: "List the help center's notice headings (categories).",
		Example: map[string]any{"language": "en"},
		Outputs: []steps.Output{
			{Name: "categories", Type: "list", Description: "headings in their order: {id, name, order, languages}"},
			{Name: "count", Type: "integer", Description: "number of headings"},
		},
		Plan: func(*connParams) []steps.PlannedCall {
			return []steps.PlannedCall{{Method: "GET", Path: "/{serviceId}/api/v2/notice/categories.json"}}
		},
		Run: runCategories,
	}))
}

func runCategories(ctx context.Context, c *steps.Call, p *connParams) (steps.Outputs, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cl, err := openClient(c, p.Connection)
	if err != nil {
		return nil, err
	}
	hs, err := cl.Headings(ctx, p.Language)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(hs))
	for i, h := range hs {
		out[i] = map[string]any{"id": h.CategoryID, "name": h.Name, "order": h.OrderNo, "languages": stringMap(h.Languages)}
	}
	return steps.Outputs{"categories": out, "count": len(out)}, nil
}

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
