package notice

import (
	"context"
	"fmt"
	"strconv"

	"github.com/runbook/runbook/internal/cloud/helpcenter"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

// client is the help-center client with what the steps read from the
// connection beside it.
type client struct {
	*helpcenter.Client
	service  string
	language string // the connection's language (default "ko")
	link     string // notice page URL pattern with {id}, or ""
}

// openClient builds a client from the named connection. Besides the keys
// helpcenter.ConfigFrom reads, an optional notice_url (a page address with
// "{id}") gives each notice a url.
func openClient(c *steps.Call, connection string) (*client, error) {
	conn, err := c.Host.Connection(connection)
	if err != nil {
		return nil, err
	}
	cfg, err := helpcenter.ConfigFrom(conn)
	if err != nil {
		return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("connection %q", connection), Err: err}
	}
	cl, err := helpcenter.New(cfg)
	if err != nil {
		return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("connection %q", connection), Err: err}
	}
	link, _ := conn["notice_url"].(string)
	return &client{Client: cl, service: cl.ServiceID(), language: cfg.Language, link: link}, nil
}

// listQuery is one page request.
type listQuery struct {
	filter   filterParams
	language string
	sort     string
	page     int
	pageSize int
}

type listResult struct {
	notices      []Notice
	total, pages int
}

func (q listQuery) options() (helpcenter.ListOptions, error) {
	keys, err := helpcenter.ParseSort(q.sort)
	if err != nil {
		return helpcenter.ListOptions{}, &fault.Error{Code: fault.Invalid, Message: "sort", Err: err}
	}
	return helpcenter.ListOptions{
		Language: q.language, CategoryID: int(q.filter.CategoryID), TagID: int(q.filter.TagID),
		Query: q.filter.Query, Sort: keys, Page: q.page, PageSize: q.pageSize,
	}, nil
}

// list reads one page, normalised.
func (cl *client) list(ctx context.Context, q listQuery) (listResult, error) {
	o, err := q.options()
	if err != nil {
		return listResult{}, err
	}
	pg, err := cl.Notices(ctx, o)
	if err != nil {
		return listResult{}, err
	}
	out := listResult{total: pg.Total, pages: pg.Pages, notices: make([]Notice, len(pg.Notices))}
	for i, n := range pg.Notices {
		out.notices[i] = cl.summary(n)
	}
	return out, nil
}

func (cl *client) summary(n helpcenter.Notice) Notice {
	return Notice{
		ID: int64(n.ID), Title: n.Title, CategoryID: int64(n.CategoryID), Category: n.CategoryName,
		Pinned: bool(n.IsTop), DisplayAt: n.DisplayDt.Time, UpdatedAt: n.UpdatedDt.Time(),
		Tags: append([]string{}, n.Tags...), IsNew: bool(n.IsNew), URL: noticeURL(cl.link, int64(n.ID)),
		Content: n.Content,
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
