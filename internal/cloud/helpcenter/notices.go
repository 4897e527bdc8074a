package helpcenter

import (
	"context"
	"fmt"
	"io"
	"iter"
	"mime"
	"net/url"
	"strconv"
	"strings"

	"github.com/runbook/runbook/internal/fault"
)

// MaxPageSize is the largest page the notice list serves.
const MaxPageSize = 200

// DefaultPageSize is the API's page size when none is sent.
const DefaultPageSize = 10

// Sort fields of the notice list.
const (
	SortIsTop     = "isTop"
	SortCreatedDt = "createdDt"
	SortUpdatedDt = "updatedDt"
	SortDisplayDt = "displayDt"
)

// SortKey is one key of the list order.
type SortKey struct {
	Field string // isTop, createdDt, updatedDt or displayDt
	Desc  bool
}

func (k SortKey) String() string {
	if k.Desc {
		return k.Field + ":desc"
	}
	return k.Field + ":asc"
}

// DefaultSort is the order the API applies when no sort is sent.
var DefaultSort = []SortKey{{SortIsTop, true}, {SortDisplayDt, true}, {SortUpdatedDt, true}}

// ParseSort reads the API's sort syntax, "field:asc|desc" keys separated by
// commas ("" is no key). The direction is required.
func ParseSort(s string) ([]SortKey, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var keys []SortKey
	for _, part := range strings.Split(s, ",") {
		field, dir, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok {
			return nil, fault.Errorf(fault.Invalid, "sort: %q has no direction (want field:asc or field:desc)", part)
		}
		var k SortKey
		switch strings.ToLower(strings.TrimSpace(dir)) {
		case "asc":
		case "desc":
			k.Desc = true
		default:
			return nil, fault.Errorf(fault.Invalid, "sort: direction of %q must be asc or desc (got %q)", field, dir)
		}
		k.Field = strings.TrimSpace(field)
		keys = append(keys, k)
	}
	if err := checkSort(keys); err != nil {
		return nil, err
	}
	return keys, nil
}

func checkSort(keys []SortKey) error {
	seen := map[string]bool{}
	for _, k := range keys {
		switch k.Field {
		case SortIsTop, SortCreatedDt, SortUpdatedDt, SortDisplayDt:
		default:
			return fault.Errorf(fault.Invalid, "sort: unknown field %q (want isTop, createdDt, updatedDt or displayDt)", k.Field)
		}
		if seen[k.Field] {
			return fault.Errorf(fault.Invalid, "sort: field %q appears twice", k.Field)
		}
		seen[k.Field] = true
	}
	return nil
}

// FormatSort renders keys in the API's syntax: "isTop:desc,displayDt:asc".
func FormatSort(keys []SortKey) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k.String()
	}
	return strings.Join(parts, ",")
}

// ListOptions select and order notices. Zero fields are not sent, except
// PageSize, which must be chosen (1..200).
type ListOptions struct {
	Language   string // "" uses Config.Language
	CategoryID int    // heading; 0: every heading
	TagID      int    // 0: every tag
	Query      string // searched in title and content
	Sort       []SortKey
	Page       int // 1-based; 0 means 1
	PageSize   int // 1..200
}

func (o ListOptions) check() error {
	if o.PageSize < 1 || o.PageSize > MaxPageSize {
		return fault.Errorf(fault.Invalid, "helpcenter: pageSize must be between 1 and %d (got %d)", MaxPageSize, o.PageSize)
	}
	if o.Page < 0 {
		return fault.Errorf(fault.Invalid, "helpcenter: page must be 1 or more (got %d)", o.Page)
	}
	if o.CategoryID < 0 || o.TagID < 0 {
		return fault.Errorf(fault.Invalid, "helpcenter: categoryId and tagId must not be negative")
	}
	return checkSort(o.Sort)
}

func (c *Client) lang(q url.Values, lang string) url.Values {
	if lang == "" {
		lang = c.cfg.Language
	}
	if lang != "" {
		q.Set("language", lang)
	}
	return q
}

func (c *Client) path(rest string) string {
	return "/" + url.PathEscape(c.cfg.ServiceID) + "/api/v2/notice/" + rest
}

// Headings lists the headings (notice categories).
func (c *Client) Headings(ctx context.Context, lang string) ([]Heading, error) {
	var r struct {
		Contents []Heading `json:"contents"`
	}
	if err := c.getJSON(ctx, c.path("categories.json"), c.lang(url.Values{}, lang), &r); err != nil {
		return nil, fmt.Errorf("helpcenter: list headings: %w", err)
	}
	return r.Contents, nil
}

// Tags lists the tags.
func (c *Client) Tags(ctx context.Context, lang string) ([]Tag, error) {
	var r struct {
		Contents []Tag `json:"contents"`
	}
	if err := c.getJSON(ctx, c.path("tags.json"), c.lang(url.Values{}, lang), &r); err != nil {
		return nil, fmt.Errorf("helpcenter: list tags: %w", err)
	}
	return r.Contents, nil
}

// Notices returns one page of the notice list. Options are checked before
// any request is sent.
func (c *Client) Notices(ctx context.Context, o ListOptions) (*Page, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	q := c.lang(url.Values{}, o.Language)
	if o.CategoryID > 0 {
		q.Set("categoryId", strconv.Itoa(o.CategoryID))
	}
	if o.TagID > 0 {
		q.Set("tagId", strconv.Itoa(o.TagID))
	}
	if o.Query != "" {
		q.Set("query", o.Query)
	}
	if len(o.Sort) > 0 {
		q.Set("sort", FormatSort(o.Sort))
	}
	page := max(o.Page, 1)
	q.Set("page", strconv.Itoa(page))
	q.Set("pageSize", strconv.Itoa(o.PageSize))
	var p Page
	if err := c.getJSON(ctx, c.path("list.json"), q, &p); err != nil {
		return nil, fmt.Errorf("helpcenter: list notices (page %d): %w", page, err)
	}
	for i := range p.Notices {
		c.relocate(&p.Notices[i].DisplayDt)
	}
	return &p, nil
}

// All walks the notice list from o.Page (default 1) to the last page and
// yields each notice once, up to limit notices (0: no limit). An error is
// yielded once, last.
//
// Each notice ID is yielded at most once even when notices are added while
// the walk runs (an addition shifts later notices onto the next page, where
// they would otherwise be seen twice). A notice added during the walk may
// be missed; the walk ends at the last page the latest answer reports, so a
// growing total is followed.
func (c *Client) All(ctx context.Context, o ListOptions, limit int) iter.Seq2[Notice, error] {
	return func(yield func(Notice, error) bool) {
		if err := o.check(); err != nil {
			yield(Notice{}, err)
			return
		}
		seen := map[int]bool{}
		n := 0
		for page := max(o.Page, 1); ; page++ {
			o.Page = page
			p, err := c.Notices(ctx, o)
			if err != nil {
				yield(Notice{}, err)
				return
			}
			for _, nt := range p.Notices {
				if seen[nt.ID] {
					continue
				}
				seen[nt.ID] = true
				if !yield(nt, nil) {
					return
				}
				if n++; limit > 0 && n >= limit {
					return
				}
			}
			if len(p.Notices) == 0 || page >= p.Pages {
				return
			}
		}
	}
}

// Notice returns one notice with its attachments and tags.
func (c *Client) Notice(ctx context.Context, id int, lang string) (*NoticeDetail, error) {
	if id <= 0 {
		return nil, fault.Errorf(fault.Invalid, "helpcenter: notice ID must be positive (got %d)", id)
	}
	var r struct {
		Content *NoticeDetail `json:"content"`
	}
	if err := c.getJSON(ctx, c.path("detail/"+strconv.Itoa(id)+".json"), c.lang(url.Values{}, lang), &r); err != nil {
		return nil, fmt.Errorf("helpcenter: get notice %d: %w", id, err)
	}
	if r.Content == nil {
		return nil, &fault.Error{Code: fault.NotFound, Message: fmt.Sprintf("helpcenter: get notice %d: the answer holds no notice", id)}
	}
	c.relocate(&r.Content.DisplayDt)
	return r.Content, nil
}

func (c *Client) relocate(d *DisplayTime) {
	if c.cfg.Location != Seoul() && d.Raw != "" {
		*d = ParseDisplayTime(d.Raw, c.cfg.Location)
	}
}

// AttachmentInfo describes a file the attachment operation answered.
type AttachmentInfo struct {
	FileName    string // from Content-Disposition ("" when absent)
	ContentType string
	Size        int64 // Content-Length; -1 when unknown
}

// Attachment opens (download false: type=open) or downloads (type=download)
// the attachment attachmentID (attachments[].attachmentId). The caller
// closes the body.
func (c *Client) Attachment(ctx context.Context, attachmentID string, download bool) (io.ReadCloser, AttachmentInfo, error) {
	if strings.TrimSpace(attachmentID) == "" {
		return nil, AttachmentInfo{}, fault.Errorf(fault.Invalid, "helpcenter: attachment ID is empty")
	}
	q := url.Values{"type": {"open"}}
	if download {
		q.Set("type", "download")
	}
	resp, err := c.get(ctx, c.path("attachments/"+url.PathEscape(attachmentID)), q)
	if err != nil {
		return nil, AttachmentInfo{}, fmt.Errorf("helpcenter: attachment %s: %w", attachmentID, err)
	}
	info := AttachmentInfo{ContentType: resp.Header.Get("Content-Type"), Size: resp.ContentLength}
	if _, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition")); err == nil {
		info.FileName = params["filename"]
	}
	return resp.Body, info, nil
}
