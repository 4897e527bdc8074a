package notice

import (
	"context"

	"github.com/runbook/runbook/internal/cloud/helpcenter"
	"github.com/runbook/runbook/internal/steps"
)

type getParams struct {
	connParams
	ID int64 `json:"id" required:"true" min:"1" desc:"notice ID"`
}

func init() {
	steps.Register(steps.Define(steps.Def[getParams]{
		Type:    "notice.get",
		Summary: "Read one notice with its contents, tags and attachments.",
		Example: map[string]any{"id": 12, "language": "zh"},
		Outputs: []steps.Output{
			{Name: "notice", Type: "map", Description: "the notice as notice.list gives it, plus content, read_count and attachments [{id, file_name, content_type, size}]"},
		},
		Plan: func(*getParams) []steps.PlannedCall {
			return []steps.PlannedCall{{Method: "GET", Path: "/{serviceId}/api/v2/notice/detail/{id}.json"}}
		},
		Run: runGet,
	}))
}

func runGet(ctx context.Context, c *steps.Call, p *getParams) (steps.Outputs, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cl, err := openClient(c, p.Connection)
	if err != nil {
		return nil, err
	}
	d, err := cl.Notice(ctx, int(p.ID), p.Language)
	if err != nil {
		return nil, err
	}
	return steps.Outputs{"notice": cl.detail(d)}, nil
}

func (cl *client) detail(d *helpcenter.NoticeDetail) map[string]any {
	tags := make([]string, len(d.Tags))
	for i, t := range d.Tags {
		tags[i] = t.Tag
	}
	n := Notice{
		ID: int64(d.ID), Title: d.Title, CategoryID: int64(d.CategoryID), Category: d.CategoryName,
		Pinned: bool(d.IsTop), DisplayAt: d.DisplayDt.Time, UpdatedAt: d.UpdatedDt.Time(),
		Tags: tags, IsNew: bool(d.IsNew), URL: noticeURL(cl.link, int64(d.ID)),
	}
	m := n.Map()
	m["content"] = d.Content
	m["read_count"] = d.ReadCount
	atts := make([]any, len(d.Attachments))
	for i, a := range d.Attachments {
		atts[i] = map[string]any{"id": a.ID, "file_name": a.FileName, "content_type": a.ContentType, "size": a.Size}
	}
	m["attachments"] = atts
	tagIDs := make([]any, len(d.Tags))
	for i, t := range d.Tags {
		tagIDs[i] = map[string]any{"id": t.TagID, "name": t.Tag}
	}
	m["tag_ids"] = tagIDs
	return m
}
