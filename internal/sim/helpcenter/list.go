package helpcenter

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

const (
	maxPageSize     = 200
	defaultPageSize = 10
)

type sortKey struct {
	field string
	desc  bool
}

var defaultSort = []sortKey{{"isTop", true}, {"displayDt", true}, {"updatedDt", true}}

func parseSort(v string) ([]sortKey, error) {
	if strings.TrimSpace(v) == "" {
		return defaultSort, nil
	}
	var keys []sortKey
	seen := map[string]bool{}
	for _, part := range strings.Split(v, ",") {
		field, dir, found := strings.Cut(strings.TrimSpace(part), ":")
		if !found {
			return nil, fmt.Errorf("sort %q: want field:asc or field:desc", part)
		}
		switch field {
		case "isTop", "createdDt", "updatedDt", "displayDt":
		default:
			return nil, fmt.Errorf("sort field %q is not one of isTop, createdDt, updatedDt, displayDt", field)
		}
		if seen[field] {
			return nil, fmt.Errorf("sort field %q appears twice", field)
		}
		seen[field] = true
		k := sortKey{field: field}
		switch strings.ToLower(dir) {
		case "asc":
		case "desc":
			k.desc = true
		default:
			return nil, fmt.Errorf("sort direction %q of %s is not asc or desc", dir, field)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

func compare(a, b *notice, keys []sortKey) int {
	for _, k := range keys {
		var c int
		switch k.field {
		case "isTop":
			c = boolInt(a.isTop) - boolInt(b.isTop)
		case "createdDt":
			c = a.created.Compare(b.created)
		case "updatedDt":
			c = a.updated.Compare(b.updated)
		case "displayDt":
			c = a.display.Compare(b.display)
		}
		if k.desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return b.id - a.id // newest ID first: a total order, pages never overlap
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// intParam reads an optional integer parameter.
func intParam(q url.Values, name string, def int) (int, error) {
	v := strings.TrimSpace(q.Get(name))
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s must be an integer (got %q)", name, v)
	}
	return n, nil
}

func (s *Service) list(w http.ResponseWriter, q url.Values, lang string) {
	var ints [4]int
	for i, p := range []struct {
		name string
		def  int
	}{{"categoryId", 0}, {"tagId", 0}, {"page", 1}, {"pageSize", defaultPageSize}} {
		n, err := intParam(q, p.name, p.def)
		if err != nil {
			fail(w, 400, err.Error())
			return
		}
		ints[i] = n
	}
	category, tag, page, pageSize := ints[0], ints[1], ints[2], ints[3]
	if pageSize < 1 || pageSize > maxPageSize {
		fail(w, 400, fmt.Sprintf("pageSize must be between 1 and %d (got %d)", maxPageSize, pageSize))
		return
	}
	if page < 1 {
		fail(w, 400, fmt.Sprintf("page must be 1 or more (got %d)", page))
		return
	}
	keys, err := parseSort(q.Get("sort"))
	if err != nil {
		fail(w, 400, err.Error())
		return
	}
	query := strings.ToLower(strings.TrimSpace(q.Get("query")))
	now := s.env.Clock.Now()

	s.mu.Lock()
	var hits []*notice
	for _, nt := range s.notices {
		if category != 0 && nt.category != category {
			continue
		}
		if tag != 0 && !slices.Contains(nt.tags, tag) {
			continue
		}
		if query != "" && !strings.Contains(strings.ToLower(nt.text(nt.title, lang)), query) &&
			!strings.Contains(strings.ToLower(nt.text(nt.content, lang)), query) {
			continue
		}
		hits = append(hits, nt)
	}
	slices.SortFunc(hits, func(a, b *notice) int { return compare(a, b, keys) })
	total := len(hits)
	pages := (total + pageSize - 1) / pageSize
	from := min((page-1)*pageSize, total)
	to := min(from+pageSize, total)
	contents := make([]summary, 0, to-from)
	for _, nt := range hits[from:to] {
		contents = append(contents, s.summary(nt, lang, now))
	}
	s.mu.Unlock()
	ok(w, map[string]any{"contents": contents, "total": total, "pages": pages, "pageNum": page, "pageSize": pageSize})
}

// summary is a list item, with the spec's field types: tagStr text and
// absent without tags, isNew a string.
type summary struct {
	NoticeID     int    `json:"noticeId"`
	CategoryID   int    `json:"categoryId"`
	IsTop        bool   `json:"isTop"`
	Title        string `json:"title"`
	Content      string `json:"content"`
	DisplayDt    string `json:"displayDt"`
	UpdatedDt    int64  `json:"updatedDt"`
	CategoryName string `json:"categoryName"`
	TagStr       string `json:"tagStr,omitempty"`
	IsNew        string `json:"isNew"`
}

func (s *Service) summary(nt *notice, lang string, now time.Time) summary {
	names := make([]string, 0, len(nt.tags))
	for _, id := range nt.tags {
		names = append(names, findNamed(tags, id).names[lang])
	}
	return summary{
		NoticeID: nt.id, CategoryID: nt.category, IsTop: nt.isTop,
		Title: nt.text(nt.title, lang), Content: nt.text(nt.content, lang),
		DisplayDt: nt.display.In(seoul()).Format("2006.01.02"), UpdatedDt: nt.updated.UnixMilli(),
		CategoryName: findNamed(headings, nt.category).names[lang], TagStr: strings.Join(names, ","),
		IsNew: strconv.FormatBool(isNew(nt.display, now)),
	}
}

type detailAttachment struct {
	AttachmentID string `json:"attachmentId"`
	FileName     string `json:"fileName"`
	ContentType  string `json:"contentType"`
	Size         int64  `json:"size"`
}

type detailTag struct {
	TagID int    `json:"tagId"`
	Tag   string `json:"tag"`
}

type detail struct {
	NoticeID     int                `json:"noticeId"`
	CategoryID   int                `json:"categoryId"`
	IsTop        bool               `json:"isTop"`
	Title        string             `json:"title"`
	Content      string             `json:"content"`
	DisplayDt    string             `json:"displayDt"`
	AttachmentYn string             `json:"attachmentYn"`
	ReadCnt      int                `json:"readCnt"`
	UpdatedDt    int64              `json:"updatedDt"`
	Attachments  []detailAttachment `json:"attachments"`
	Tags         []detailTag        `json:"tags"`
	CategoryName string             `json:"categoryName"`
	IsNew        string             `json:"isNew"`
}

func (s *Service) detailOf(nt *notice, lang string, now time.Time) detail {
	sm := s.summary(nt, lang, now)
	d := detail{
		NoticeID: nt.id, CategoryID: nt.category, IsTop: nt.isTop, Title: sm.Title, Content: sm.Content,
		DisplayDt: sm.DisplayDt, AttachmentYn: yn(len(nt.attachments) > 0), ReadCnt: nt.readCnt,
		UpdatedDt: sm.UpdatedDt, CategoryName: sm.CategoryName, IsNew: sm.IsNew,
		Attachments: []detailAttachment{}, Tags: []detailTag{},
	}
	for _, a := range nt.attachments {
		d.Attachments = append(d.Attachments, detailAttachment{a.id, a.fileName, a.contentType, int64(len(a.data))})
	}
	for _, id := range nt.tags {
		d.Tags = append(d.Tags, detailTag{id, findNamed(tags, id).names[lang]})
	}
	return d
}

func (s *Service) detail(w http.ResponseWriter, id int, lang string) {
	now := s.env.Clock.Now()
	s.mu.Lock()
	nt, found := s.byID[id]
	var d detail
	if found {
		nt.readCnt++
		s.reads++
		d = s.detailOf(nt, lang, now)
	}
	s.mu.Unlock()
	if !found {
		fail(w, 404, fmt.Sprintf("no data: notice %d does not exist", id))
		return
	}
	ok(w, map[string]any{"content": d})
}

func (s *Service) attachment(w http.ResponseWriter, rawID, typ string) {
	id, err := url.PathUnescape(rawID)
	if err != nil {
		id = rawID
	}
	disposition := "inline"
	switch strings.ToLower(typ) {
	case "", "open":
	case "download":
		disposition = "attachment"
	default:
		fail(w, 400, fmt.Sprintf("type must be open or download (got %q)", typ))
		return
	}
	s.mu.Lock()
	a, found := s.files[id]
	s.mu.Unlock()
	if !found {
		fail(w, 9005, fmt.Sprintf("no related data: no attachment %q", id))
		return
	}
	w.Header().Set("Content-Type", a.contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(a.data)))
	w.Header().Set("Content-Disposition", mime.FormatMediaType(disposition, map[string]string{"filename": a.fileName}))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(a.data)
}

// admin serves POST /_admin/notices, POST /_admin/reset and GET
// /_admin/stats (plain JSON, not the API's envelope).
func (s *Service) admin(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/_admin/notices" && r.Method == http.MethodPost:
		var in NewNotice
		if err := json.NewDecoder(io.LimitReader(r.Body, 8<<20)).Decode(&in); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad notice: " + err.Error()})
			return
		}
		id, err := s.AddNotice(in)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		s.mu.Lock()
		d := s.detailOf(s.byID[id], language(r.URL.Query().Get("language")), s.env.Clock.Now())
		s.mu.Unlock()
		writeJSON(w, http.StatusCreated, d)
	case r.URL.Path == "/_admin/reset" && r.Method == http.MethodPost:
		var in struct {
			Notices int `json:"notices"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil || in.Notices < 0 {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": `want {"notices": N} with N >= 0`})
			return
		}
		s.Reset(in.Notices)
		writeJSON(w, http.StatusOK, map[string]int{"notices": s.Count()})
	case r.URL.Path == "/_admin/stats" && r.Method == http.MethodGet:
		s.mu.Lock()
		defer s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{
			"service_id": s.opts.ServiceID, "notices": len(s.notices), "headings": len(headings),
			"tags": len(tags), "attachments": len(s.files), "reads": s.reads,
		})
	default:
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no helpcenter admin route " + r.Method + " " + r.URL.Path})
	}
}
