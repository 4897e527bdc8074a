package notice

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

type digestParams struct {
	Connection string `json:"connection" default:"helpcenter" pattern:"^[A-Za-z][A-Za-z0-9_-]*$" desc:"name of the help-center connection"`
	filterParams
	Format     string            `json:"format" enum:"text,markdown,html" default:"markdown" desc:"how the digest is written"`
	Template   string            `json:"template" maxlen:"65536" desc:"Go template over {Title, Notices, Count, More, Since, Service, Language}; html uses html/template"`
	Title      string            `json:"title" maxlen:"500" desc:"title line (default: \"N new help-center notices\")"`
	URL        string            `json:"url" format:"uri" desc:"target: POST the digest as JSON to this http(s) URL"`
	File       string            `json:"file" maxlen:"1024" desc:"target: write the digest to this file, relative to the playbook directory"`
	FileMode   string            `json:"file_mode" enum:"append,write" default:"append" desc:"append to the file target, or replace it"`
	BodyShape  string            `json:"body_shape" enum:"text,slack,teams,custom" default:"text" desc:"JSON body for url: text {\"text\"}, slack {\"text\",\"blocks\"}, teams (MessageCard) or custom (body)"`
	Body       map[string]any    `json:"body" desc:"body_shape custom: JSON body whose strings may hold {{digest}}, {{title}} and {{count}}"`
	Headers    map[string]string `json:"headers" desc:"extra request headers for url"`
	Timeout    steps.Duration    `json:"timeout" default:"30s" min:"1s" max:"10m" desc:"limit for the post"`
	PostEmpty  bool              `json:"post_empty" desc:"post (or write) a digest even when nothing is new"`
	MaxNotices int               `json:"max_notices" default:"50" min:"1" max:"1000" desc:"notices shown; the rest are summarised as \"and N more\""`
	MaxScan    int               `json:"max_scan" default:"1000" min:"1" max:"100000" desc:"most notices read from the help center per digest"`
	Cursor     string            `json:"cursor" maxlen:"100" desc:"name that keeps the cursors of digests with the same filters apart (e.g. one per target)"`
	FirstRun   string            `json:"first_run" default:"since:7d" desc:"without a saved cursor: all, none (only remember the newest) or since:<duration> such as since:7d"`
}

// filterParams are the list filters a digest and notice.list share.
type filterParams struct {
	Language   string `json:"language" pattern:"^[a-z]{2}([-_][A-Za-z]{2,4})?$" desc:"language code (ko, en, ja, zh, th); default: the connection's"`
	CategoryID int64  `json:"category_id" min:"1" desc:"only notices of this heading"`
	TagID      int64  `json:"tag_id" min:"1" desc:"only notices with this tag"`
	Query      string `json:"query" maxlen:"200" desc:"search words, matched in title and content"`
}

// digestCheckpoint is the digest identity persisted before the post.
type digestCheckpoint struct {
	Phase     string    `json:"phase"` // posting, posted
	CursorKey string    `json:"cursor_key"`
	HadCursor bool      `json:"had_cursor"`
	Before    watermark `json:"before"`
	After     watermark `json:"after"`
	IDs       []int64   `json:"ids"`
	Count     int       `json:"count"`
	Key       string    `json:"idempotency_key"`
	Body      string    `json:"body"`   // exactly what is (re)sent
	Digest    string    `json:"digest"` // rendered text, capped
}

const (
	phasePosting = "posting"
	phasePosted  = "posted"
	// digestOutputMax caps the digest text in outputs and checkpoints.
	digestOutputMax = 64 << 10
)

func init() {
	steps.Register(steps.Define(steps.Def[digestParams]{
		Type: "notice.digest",
		Scripts: []steps.Script{{Param: "template", NoVariables: true,
			Instead: "pass the value through title (the template reads it as {{ .Title }}, escaped for html)"}},
		Summary: "Post the help-center notices that are new or updated since the last digest (a cursor in the state " +
			"store, per connection, service and filters) to a URL or a file. The cursor advances only after the post " +
			"succeeded; a resumed step re-sends the same digest with the same Idempotency-Key instead of a second one.",
		Example: map[string]any{"url": "https://hooks.example.com/services/notices", "body_shape": "slack",
			"first_run": "since:7d", "category_id": 2},
		Mutating: true,
		Outputs: []steps.Output{
			{Name: "posted", Type: "boolean", Description: "whether a digest was posted or written"},
			{Name: "count", Type: "integer", Description: "notices new since the cursor"},
			{Name: "notice_ids", Type: "list", Description: "their IDs, newest first"},
			{Name: "cursor", Type: "map", Description: "key (in the state store), before and after: {updated_ms, updated_at, ids}"},
			{Name: "digest", Type: "string", Description: "the rendered digest (capped at 64 KiB)"},
			{Name: "idempotency_key", Type: "string", Description: "the Idempotency-Key sent with the post (\"\" when nothing was posted)"},
		},
		Check:     checkDigest,
		Run:       runDigest,
		Reconcile: reconcileDigest,
		Plan:      planDigest,
	}))
}

func checkDigest(p *digestParams, dynamic map[string]bool) []fault.Problem {
	var out []fault.Problem
	hasURL, hasFile := p.URL != "" || dynamic["url"], p.File != "" || dynamic["file"]
	switch {
	case hasURL && hasFile:
		out = append(out, fault.Problem{Path: "file", Message: "give either url or file, not both"})
	case !hasURL && !hasFile:
		out = append(out, fault.Problem{Message: "a target is required: url (HTTP POST) or file"})
	}
	if !dynamic["url"] && p.URL != "" && !strings.HasPrefix(p.URL, "http://") && !strings.HasPrefix(p.URL, "https://") {
		out = append(out, fault.Problem{Path: "url", Message: "must be an http or https URL"})
	}
	if !dynamic["file"] && p.File != "" {
		if err := localPath("file", p.File); err != nil {
			out = append(out, fault.Problem{Path: "file", Message: "must be a relative path inside the playbook directory (no .., not absolute)"})
		}
	}
	if hasFile && !dynamic["body_shape"] && p.BodyShape != "text" {
		out = append(out, fault.Problem{Path: "body_shape", Message: "applies to url only"})
	}
	if !dynamic["body_shape"] && !dynamic["body"] {
		if p.BodyShape == "custom" && p.Body == nil {
			out = append(out, fault.Problem{Path: "body", Message: "is required with body_shape: custom"})
		}
		if p.BodyShape != "custom" && p.Body != nil {
			out = append(out, fault.Problem{Path: "body", Message: "needs body_shape: custom"})
		}
	}
	if !dynamic["first_run"] {
		if _, _, err := parseFirstRun(p.FirstRun); err != nil {
			out = append(out, fault.Problem{Path: "first_run", Message: err.Error()})
		}
	}
	if !dynamic["template"] && !dynamic["format"] && p.Template != "" {
		if _, err := compileTemplate(p.Format, p.Template); err != nil {
			out = append(out, fault.Problem{Path: "template", Message: err.Error()})
		}
	}
	return out
}

func planDigest(p *digestParams) []steps.PlannedCall {
	calls := []steps.PlannedCall{{Method: "GET", Path: "/{serviceId}/api/v2/notice/list.json",
		Note: "pages sorted by updatedDt:desc until the saved cursor"}}
	if p.URL != "" {
		calls = append(calls, steps.PlannedCall{Method: "POST", Path: hostOf(p.URL), Note: "the digest, when there is something new"})
	}
	return calls
}

func runDigest(ctx context.Context, c *steps.Call, p *digestParams) (steps.Outputs, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cp, ok := resumeCheckpoint(c); ok {
		return finishDigest(ctx, c, p, cp)
	}
	mode, since, err := parseFirstRun(p.FirstRun)
	if err != nil {
		return nil, &fault.Error{Code: fault.Invalid, Message: "first_run: " + err.Error()}
	}
	cl, err := openClient(c, p.Connection)
	if err != nil {
		return nil, err
	}
	lang := p.Language
	if lang == "" {
		lang = cl.language
	}
	key := cursorKey(p.Connection, cl.service, p.Cursor, lang, p.CategoryID, p.TagID, p.Query)
	raw, err := c.Host.Cursor(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read the digest cursor: %w", err)
	}
	before, had, err := parseWatermark(raw)
	if err != nil {
		return nil, &fault.Error{Code: fault.Internal, Message: key, Err: err}
	}
	if !had && mode == "since" {
		floor := c.Now().Add(-since).UnixMilli()
		before = watermark{UpdatedMs: floor, Floor: floor}
	}
	fresh, err := collect(ctx, cl, p, lang, before, !had && mode == "none")
	if err != nil {
		return nil, err
	}
	after := before
	for _, n := range fresh {
		after = after.add(n)
	}
	if !had && mode == "none" {
		// First run: remember where the help center stands, post nothing.
		// Only one page was read: what lies beyond it is older than its
		// last notice and counts as seen too, or the next digest would
		// post it as new.
		if len(fresh) > 0 {
			after = after.merge(watermark{Floor: fresh[len(fresh)-1].stamp()})
		}
		c.Log.Info("first digest: cursor set to the newest notice, nothing posted", "notices", len(fresh))
		fresh = nil
	}
	ids := make([]int64, len(fresh))
	for i, n := range fresh {
		ids[i] = n.ID
	}
	cp := digestCheckpoint{CursorKey: key, HadCursor: had, Before: before, After: after, IDs: ids, Count: len(fresh)}
	if len(fresh) == 0 && !p.PostEmpty {
		if !had || len(fresh) > 0 {
			if err := saveCursor(ctx, c, key, after); err != nil {
				return nil, err
			}
		}
		return outputs(cp, false), nil
	}

	title := p.Title
	if title == "" {
		title = defaultTitle(len(fresh))
	}
	shown := fresh
	if len(shown) > p.MaxNotices {
		shown = shown[:p.MaxNotices]
	}
	since0 := before.time()
	text, err := render(p.Format, p.Template, DigestData{
		Title: title, Notices: shown, Count: len(fresh), More: len(fresh) - len(shown),
		Since: since0, Service: cl.service, Language: lang,
	})
	if err != nil {
		return nil, &fault.Error{Code: fault.Invalid, Message: "render the digest", Err: err}
	}
	body := text
	if p.URL != "" {
		b, err := payload(p, text, title, len(fresh))
		if err != nil {
			return nil, &fault.Error{Code: fault.Invalid, Message: "build the request body", Err: err}
		}
		body = string(b)
	}
	cp.Phase = phasePosting
	// The key is the digest's identity, not the run's: a later run that
	// computes the same digest (because this one never saved the cursor)
	// sends the same key, and the receiver drops the repeat. An empty
	// digest (post_empty) is tied to its run instead.
	cp.Key = "notice-digest/" + digestID(key, before, after, ids)
	if len(ids) == 0 {
		cp.Key = c.IdempotencyKey + "/" + digestID(key, before, after, ids)
	}
	cp.Body = body
	cp.Digest = capText(text)
	if err := checkpoint(ctx, c, cp); err != nil {
		return nil, err
	}
	return finishDigest(ctx, c, p, cp)
}

// finishDigest delivers a checkpointed digest (again, on resume, with the
// same key and body), records the delivery, then saves the cursor.
func finishDigest(ctx context.Context, c *steps.Call, p *digestParams, cp digestCheckpoint) (steps.Outputs, error) {
	if cp.Phase == phasePosting {
		if p.URL != "" {
			if err := postURL(ctx, p, []byte(cp.Body), cp.Key); err != nil {
				return nil, err
			}
		} else if _, err := writeDigestFile(c.Dir, p, cp.Body); err != nil {
			return nil, err
		}
		crashpoint("notice.digest.posted")
		cp.Phase = phasePosted
		if err := checkpoint(ctx, c, cp); err != nil {
			return nil, err
		}
		crashpoint("notice.digest.recorded")
	}
	if err := saveCursor(ctx, c, cp.CursorKey, cp.After); err != nil {
		return nil, err
	}
	return outputs(cp, true), nil
}

// reconcileDigest adopts a digest whose delivery was recorded before the
// process died; otherwise Run resumes from the checkpoint.
func reconcileDigest(ctx context.Context, c *steps.Call, _ *digestParams, _ steps.Intent) (steps.Outputs, bool, error) {
	cp, ok := resumeCheckpoint(c)
	if !ok || cp.Phase != phasePosted {
		return nil, false, nil
	}
	if err := saveCursor(ctx, c, cp.CursorKey, cp.After); err != nil {
		return nil, false, err
	}
	c.Log.Info("the digest was delivered before an interruption; only the cursor is saved", "idempotency_key", cp.Key)
	return outputs(cp, true), true, nil
}

func resumeCheckpoint(c *steps.Call) (digestCheckpoint, bool) {
	var cp digestCheckpoint
	if c.Resume == nil || json.Unmarshal(c.Resume, &cp) != nil {
		return cp, false
	}
	return cp, cp.Phase == phasePosting || cp.Phase == phasePosted
}

func checkpoint(ctx context.Context, c *steps.Call, cp digestCheckpoint) error {
	b, err := json.Marshal(cp)
	if err != nil {
		return fmt.Errorf("encode the digest checkpoint: %w", err)
	}
	if err := c.Host.Checkpoint(context.WithoutCancel(ctx), b); err != nil {
		return fmt.Errorf("checkpoint the digest: %w", err)
	}
	return nil
}

// saveCursor moves the cursor to w, or leaves it where a later digest
// already moved it.
func saveCursor(ctx context.Context, c *steps.Call, key string, w watermark) error {
	ctx = context.WithoutCancel(ctx)
	raw, err := c.Host.Cursor(ctx, key)
	if err != nil {
		return fmt.Errorf("read the digest cursor: %w", err)
	}
	if cur, ok, err := parseWatermark(raw); err == nil && ok {
		w = w.merge(cur)
	}
	b, _ := json.Marshal(w)
	if err := c.Host.SetCursor(ctx, key, b); err != nil {
		return fmt.Errorf("save the digest cursor: %w", err)
	}
	return nil
}

func outputs(cp digestCheckpoint, posted bool) steps.Outputs {
	ids := make([]any, len(cp.IDs))
	for i, id := range cp.IDs {
		ids[i] = id
	}
	return steps.Outputs{
		"posted":          posted,
		"count":           cp.Count,
		"notice_ids":      ids,
		"cursor":          map[string]any{"key": cp.CursorKey, "before": cp.Before.output(), "after": cp.After.output()},
		"digest":          cp.Digest,
		"idempotency_key": cp.Key,
	}
}

func capText(s string) string {
	if len(s) <= digestOutputMax {
		return s
	}
	cut := digestOutputMax
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}

// collect reads notices newest-updated first until the watermark (or
// max_scan) and returns those past it, newest first. With newestOnly it
// reads a single page (a first run that only remembers where things are).
func collect(ctx context.Context, cl *client, p *digestParams, lang string, before watermark, newestOnly bool) ([]Notice, error) {
	var out []Notice
	seen := map[int64]bool{}
	scanned := 0
	// One page size throughout: the help center places page N at
	// (N-1)*size, so a smaller last page would read notices seen already
	// and skip those after them. Past max_scan the rest of a page is left.
	size := min(200, p.MaxScan)
	for page := 1; ; page++ {
		res, err := cl.list(ctx, listQuery{filter: p.filterParams, language: lang, sort: "updatedDt:desc,displayDt:desc", page: page, pageSize: size})
		if err != nil {
			return nil, err
		}
		older := false
		for _, n := range res.notices {
			if scanned == p.MaxScan {
				break
			}
			scanned++
			if seen[n.ID] {
				continue // a notice that moved between pages while paging
			}
			seen[n.ID] = true
			if before.newer(n) {
				out = append(out, n)
			} else if n.stamp() <= before.Floor {
				older = true
			}
		}
		last := len(res.notices) == 0 || page >= res.pages || newestOnly || scanned >= p.MaxScan
		// Sorted by update time, newest first: once a page reaches the
		// watermark's floor, every later page is older still.
		if last || (older && !before.isZero()) {
			break
		}
	}
	slices.SortStableFunc(out, func(a, b Notice) int {
		if a.stamp() != b.stamp() {
			return compare(b.stamp(), a.stamp())
		}
		return compare(b.ID, a.ID)
	})
	return out, nil
}

func compare(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
