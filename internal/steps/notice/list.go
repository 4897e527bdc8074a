package notice

import (
	"context"
	"fmt"

	"github.com/runbook/runbook/internal/cloud/helpcenter"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

type listParams struct {
	Connection string `json:"connection" default:"helpcenter" pattern:"^[A-Za-z][A-Za-z0-9_-]*$" desc:"name of the help-center connection"`
	filterParams
	Sort     []string `json:"sort" pattern:"^(isTop|createdDt|updatedDt|displayDt):(asc|desc)$" desc:"order as field:asc|desc keys (isTop, createdDt, updatedDt, displayDt); default isTop:desc, displayDt:desc, updatedDt:desc"`
	Page     int      `json:"page" default:"1" min:"1" desc:"page to read (ignored with all)"`
	PageSize int      `json:"page_size" default:"10" min:"1" max:"200" desc:"notices per page"`
	All      bool     `json:"all" desc:"read every page, up to limit"`
	Limit    int      `json:"limit" default:"1000" min:"1" max:"100000" desc:"with all: most notices returned"`
}

func init() {
	steps.Register(steps.Define(steps.Def[listParams]{
		Type:    "notice.list",
		Summary: "List notices, one page or (all: true) every page up to a limit, filtered by heading, tag or search words.",
		Example: map[string]any{"language": "ko", "category_id": 2, "sort": []any{"isTop:desc", "updatedDt:desc"}, "page_size": 200, "all": true, "limit": 500},
		Outputs: []steps.Output{
			{Name: "notices", Type: "list", Description: "notices: {id, title, category_id, category, pinned, display_at, updated_at (RFC 3339), tags, is_new, url?}"},
			{Name: "count", Type: "integer", Description: "notices returned"},
			{Name: "total", Type: "integer", Description: "notices matching, as the help center counts them"},
			{Name: "pages", Type: "integer", Description: "pages at this page size"},
			{Name: "truncated", Type: "boolean", Description: "with all: whether limit stopped the walk"},
		},
		Check: checkList,
		Plan: func(*listParams) []steps.PlannedCall {
			return []steps.PlannedCall{{Method: "GET", Path: "/{serviceId}/api/v2/notice/list.json"}}
		},
		Run: runList,
	}))
}

func checkList(p *listParams, dynamic map[string]bool) []fault.Problem {
	seen := map[string]bool{}
	var out []fault.Problem
	if dynamic["sort"] {
		return nil
	}
	for i, k := range p.Sort {
		keys, err := helpcenter.ParseSort(k)
		if err != nil || len(keys) != 1 {
			continue // the pattern reports it
		}
		if seen[keys[0].Field] {
			out = append(out, fault.Problem{Path: fmt.Sprintf("sort[%d]", i), Message: fmt.Sprintf("%s is sorted on twice", keys[0].Field)})
		}
		seen[keys[0].Field] = true
	}
	return out
}

func runList(ctx context.Context, c *steps.Call, p *listParams) (steps.Outputs, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cl, err := openClient(c, p.Connection)
	if err != nil {
		return nil, err
	}
	q := listQuery{filter: p.filterParams, language: p.Language, page: p.Page, pageSize: p.PageSize}
	for i, k := range p.Sort {
		if i > 0 {
			q.sort += ","
		}
		q.sort += k
	}
	if !p.All {
		res, err := cl.list(ctx, q)
		if err != nil {
			return nil, err
		}
		return listOutputs(res.notices, res.total, res.pages, false), nil
	}
	// Every page, each notice once: a notice added while paging shifts
	// later ones onto the next page, where they would be seen twice.
	var notices []Notice
	seen := map[int64]bool{}
	total, pages, truncated := 0, 0, false
	for q.page = 1; ; q.page++ {
		res, err := cl.list(ctx, q)
		if err != nil {
			return nil, err
		}
		total, pages = res.total, res.pages
		for _, n := range res.notices {
			if seen[n.ID] {
				continue
			}
			if len(notices) == p.Limit {
				truncated = true
				break
			}
			seen[n.ID] = true
			notices = append(notices, n)
		}
		if truncated || len(res.notices) == 0 || q.page >= res.pages {
			break
		}
	}
	return listOutputs(notices, total, pages, truncated), nil
}

func listOutputs(ns []Notice, total, pages int, truncated bool) steps.Outputs {
	out := make([]any, len(ns))
	for i, n := range ns {
		out[i] = n.Map()
	}
	return steps.Outputs{"notices": out, "count": len(out), "total": total, "pages": pages, "truncated": truncated}
}
