package helpcenter_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/cloud/helpcenter"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/sim"
	simhc "github.com/runbook/runbook/internal/sim/helpcenter"
)

type fixture struct {
	srv    *sim.Server
	svc    *simhc.Service
	cfg    helpcenter.Config
	client *helpcenter.Client
	sleeps []time.Duration
}

// start runs the simulator with n notices (0: its default) and a client
// signing with the wall clock and whose backoff sleeps are recorded.
func start(t *testing.T, n int) *fixture {
	t.Helper()
	srv, err := sim.Start(context.Background(), sim.Options{Services: []string{"helpcenter"}, Seed: 7})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	f := &fixture{srv: srv, svc: srv.Service("helpcenter").(*simhc.Service)}
	if n > 0 {
		f.svc.Reset(n)
	}
	f.cfg, err = helpcenter.ConfigFrom(srv.Connections()["helpcenter"])
	require.NoError(t, err)
	f.cfg.Now = time.Now
	f.cfg.Sleep = func(ctx context.Context, d time.Duration) error { f.sleeps = append(f.sleeps, d); return nil }
	f.client = f.newClient(t, f.cfg)
	return f
}

func (f *fixture) newClient(t *testing.T, cfg helpcenter.Config) *helpcenter.Client {
	t.Helper()
	c, err := helpcenter.New(cfg)
	require.NoError(t, err)
	return c
}

func (f *fixture) listCalls() []sim.Call {
	return f.srv.Journal.Calls("helpcenter", "GET", "/"+simhc.DefaultServiceID+"/api/v2/notice/list.json")
}

func collect(t *testing.T, c *helpcenter.Client, o helpcenter.ListOptions) []helpcenter.Notice {
	t.Helper()
	var out []helpcenter.Notice
	for n, err := range c.All(context.Background(), o, 0) {
		require.NoError(t, err)
		out = append(out, n)
	}
	return out
}

func TestSignMatchesAHandComputedVector(t *testing.T) {
	// Query categoryId=1&language=ko signs the values in parameter-name
	// order: "1&ko" (FIDELITY's example).
	key := "my-security-key"
	message := "org-123" + "/svc/api/v2/notice/list.json" + "1&ko" + "1700000000000"
	require.Equal(t, "org-123/svc/api/v2/notice/list.json1&ko1700000000000", message)
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(message))
	want := base64.StdEncoding.EncodeToString(mac.Sum(nil))

	q := url.Values{"language": {"ko"}, "categoryId": {"1"}} // given out of order on purpose
	assert.Equal(t, want, helpcenter.Sign(key, "org-123", "/svc/api/v2/notice/list.json", q, 1700000000000))
	assert.NotEqual(t, want, helpcenter.Sign(key, "org-123", "/svc/api/v2/notice/list.json", url.Values{"language": {"1"}, "categoryId": {"ko"}}, 1700000000000),
		"values are ordered by parameter name, not by value")
}

func TestAllListsFourHundredFiftyNoticesExactlyOnceInThreePages(t *testing.T) {
	f := start(t, 450)
	got := collect(t, f.client, helpcenter.ListOptions{PageSize: 200})
	require.Len(t, got, 450)
	ids := map[int]bool{}
	for _, n := range got {
		assert.False(t, ids[n.ID], "notice %d listed twice", n.ID)
		ids[n.ID] = true
	}
	calls := f.listCalls()
	require.Len(t, calls, 3, "pages 1, 2 and 3")
	for i, c := range calls {
		q, _ := url.ParseQuery(c.Query)
		assert.Equal(t, []string{"200"}, q["pageSize"])
		assert.Equal(t, []string{string(rune('1' + i))}, q["page"])
	}
	p, err := f.client.Notices(context.Background(), helpcenter.ListOptions{PageSize: 200, Page: 3})
	require.NoError(t, err)
	assert.Equal(t, helpcenter.Page{Notices: p.Notices, Total: 450, Pages: 3, PageNum: 3, PageSize: 200}, *p)
	assert.Len(t, p.Notices, 50)
}

func TestAllStopsAtTheLimitAndSkipsNoticesShiftedByAnAddition(t *testing.T) {
	f := start(t, 30)
	var got []int
	for n, err := range f.client.All(context.Background(), helpcenter.ListOptions{PageSize: 10}, 15) {
		require.NoError(t, err)
		got = append(got, n.ID)
		if len(got) == 5 { // a new notice shifts every later one down by one
			_, err := f.svc.AddNotice(simhc.NewNotice{Title: "added during the walk"})
			require.NoError(t, err)
		}
	}
	assert.Len(t, got, 15)
	assert.Len(t, slices.Compact(slices.Sorted(slices.Values(got))), 15, "no notice twice")
}

func TestFiltersReturnOnlyMatchingNoticesWithTheirTotal(t *testing.T) {
	f := start(t, 0)
	ctx := context.Background()
	all := collect(t, f.client, helpcenter.ListOptions{PageSize: 200, Language: "en"})
	require.Len(t, all, simhc.DefaultNotices)
	tags, err := f.client.Tags(ctx, "en")
	require.NoError(t, err)

	for _, tc := range []struct {
		name  string
		opts  helpcenter.ListOptions
		match func(helpcenter.Notice) bool
	}{
		{"a heading filter keeps that heading", helpcenter.ListOptions{CategoryID: 2},
			func(n helpcenter.Notice) bool { return n.CategoryID == 2 }},
		{"a tag filter keeps notices with that tag", helpcenter.ListOptions{TagID: 1},
			func(n helpcenter.Notice) bool { return slices.Contains(n.Tags, tags[0].Tag) }},
		{"a query matches title or content regardless of case", helpcenter.ListOptions{Query: "KUBERNETES service"},
			func(n helpcenter.Notice) bool {
				return strings.Contains(strings.ToLower(n.Title+n.Content), "kubernetes service")
			}},
		{"a query found only in contents matches", helpcenter.ListOptions{Query: "faulty network device"},
			func(n helpcenter.Notice) bool { return strings.Contains(n.Content, "faulty network device") }},
		{"filters combine", helpcenter.ListOptions{CategoryID: 2, TagID: 1, Query: "kubernetes"},
			func(n helpcenter.Notice) bool { return n.CategoryID == 2 && slices.Contains(n.Tags, "Kubernetes") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Language, tc.opts.PageSize = "en", 200
			want := 0
			for _, n := range all {
				if tc.match(n) {
					want++
				}
			}
			require.Positive(t, want, "the generated data has matches")
			require.Less(t, want, len(all), "and non-matches")
			p, err := f.client.Notices(ctx, tc.opts)
			require.NoError(t, err)
			assert.Equal(t, want, p.Total)
			assert.Len(t, p.Notices, want)
			for _, n := range p.Notices {
				assert.True(t, tc.match(n), "notice %d %q does not match", n.ID, n.Title)
			}
		})
	}
}

func TestEachSortOrderIsWhatTheSpecSays(t *testing.T) {
	f := start(t, 0)
	ids := func(ns []helpcenter.Notice) []int {
		out := make([]int, len(ns))
		for i, n := range ns {
			out[i] = n.ID
		}
		return out
	}
	list := func(keys ...helpcenter.SortKey) []helpcenter.Notice {
		return collect(t, f.client, helpcenter.ListOptions{PageSize: 200, Sort: keys})
	}
	day := func(n helpcenter.Notice) int64 { return n.DisplayDt.Time.Unix() }
	sign := func(desc bool) int {
		if desc {
			return -1
		}
		return 1
	}
	for _, desc := range []bool{false, true} {
		dir := map[bool]string{false: "asc", true: "desc"}[desc]
		t.Run("isTop "+dir+" puts pinned notices "+map[bool]string{false: "last", true: "first"}[desc], func(t *testing.T) {
			ns := list(helpcenter.SortKey{Field: "isTop", Desc: desc})
			assert.True(t, slices.IsSortedFunc(ns, func(a, b helpcenter.Notice) int {
				return sign(desc) * (boolInt(a.IsTop) - boolInt(b.IsTop))
			}))
			assert.True(t, ns[0].IsTop == helpcenter.Flag(desc))
		})
		t.Run("displayDt "+dir+" orders by display date", func(t *testing.T) {
			ns := list(helpcenter.SortKey{Field: "displayDt", Desc: desc})
			assert.True(t, slices.IsSortedFunc(ns, func(a, b helpcenter.Notice) int { return sign(desc) * int(day(a)-day(b)) }))
		})
		t.Run("updatedDt "+dir+" orders by update time", func(t *testing.T) {
			ns := list(helpcenter.SortKey{Field: "updatedDt", Desc: desc})
			assert.True(t, slices.IsSortedFunc(ns, func(a, b helpcenter.Notice) int { return sign(desc) * int(a.UpdatedDt-b.UpdatedDt) }))
		})
	}
	t.Run("createdDt desc is createdDt asc reversed and differs from the display order", func(t *testing.T) {
		asc := ids(list(helpcenter.SortKey{Field: "createdDt"}))
		desc := ids(list(helpcenter.SortKey{Field: "createdDt", Desc: true}))
		slices.Reverse(desc)
		assert.Equal(t, asc, desc)
		assert.NotEqual(t, asc, ids(list(helpcenter.SortKey{Field: "updatedDt"})))
	})
	t.Run("the default order is isTop desc, displayDt desc, updatedDt desc", func(t *testing.T) {
		def := list()
		assert.Equal(t, ids(list(helpcenter.DefaultSort...)), ids(def))
		pinned := 0
		for _, n := range def {
			if n.IsTop {
				pinned++
			}
		}
		require.Positive(t, pinned)
		for i, n := range def {
			assert.Equal(t, i < pinned, bool(n.IsTop), "pinned notices come first")
		}
		assert.True(t, slices.IsSortedFunc(def[pinned:], func(a, b helpcenter.Notice) int { return int(day(b) - day(a)) }))
	})
	t.Run("multiple keys: updatedDt asc within isTop asc", func(t *testing.T) {
		ns := list(helpcenter.SortKey{Field: "isTop"}, helpcenter.SortKey{Field: "updatedDt"})
		assert.True(t, slices.IsSortedFunc(ns, func(a, b helpcenter.Notice) int {
			if c := boolInt(a.IsTop) - boolInt(b.IsTop); c != 0 {
				return c
			}
			return int(a.UpdatedDt - b.UpdatedDt)
		}))
		assert.True(t, bool(ns[len(ns)-1].IsTop))
	})
}

func boolInt(b helpcenter.Flag) int {
	if b {
		return 1
	}
	return 0
}

func TestBadSortsAreRefusedBeforeAnyCall(t *testing.T) {
	for _, s := range []string{"title:asc", "isTop", "isTop:up", "isTop:asc,isTop:desc"} {
		_, err := helpcenter.ParseSort(s)
		assert.Equal(t, fault.Invalid, fault.CodeOf(err), s)
	}
	keys, err := helpcenter.ParseSort("isTop:desc, createdDt:ASC")
	require.NoError(t, err)
	assert.Equal(t, "isTop:desc,createdDt:asc", helpcenter.FormatSort(keys))

	f := start(t, 0)
	_, err = f.client.Notices(context.Background(), helpcenter.ListOptions{PageSize: 10, Sort: []helpcenter.SortKey{{Field: "title"}}})
	assert.Equal(t, fault.Invalid, fault.CodeOf(err))
	assert.Empty(t, f.listCalls())
}

func TestPageSizeOutsideOneToTwoHundredIsRefusedBeforeAnyCall(t *testing.T) {
	f := start(t, 0)
	for _, size := range []int{0, 201, -1} {
		_, err := f.client.Notices(context.Background(), helpcenter.ListOptions{PageSize: size})
		require.Error(t, err)
		assert.Equal(t, fault.Invalid, fault.CodeOf(err))
		assert.Contains(t, err.Error(), "pageSize must be between 1 and 200")
		for _, err := range f.client.All(context.Background(), helpcenter.ListOptions{PageSize: size}, 0) {
			assert.Equal(t, fault.Invalid, fault.CodeOf(err))
		}
	}
	assert.Empty(t, f.srv.Journal.Calls("helpcenter", "", ""), "no request reached the API")
}

func TestTheSimulatorRefusesBadAuthenticationAndTheClientSaysWhy(t *testing.T) {
	f := start(t, 0)
	for _, tc := range []struct {
		name, want string
		change     func(*helpcenter.Config)
	}{
		{"a wrong security key", "signature is wrong", func(c *helpcenter.Config) { c.SecurityKey = "not-the-key" }},
		{"a wrong organization", "signature is wrong", func(c *helpcenter.Config) { c.OrgID = "other-org" }},
		{"a timestamp six minutes old", "X-TC-Timestamp expired",
			func(c *helpcenter.Config) {
				c.Now = func() time.Time { return time.Now().Add(-6 * time.Minute) }
			}},
		{"a timestamp six minutes ahead", "X-TC-Timestamp expired",
			func(c *helpcenter.Config) { c.Now = func() time.Time { return time.Now().Add(6 * time.Minute) } }},
		{"no security key", "Authorization header is blank", func(c *helpcenter.Config) { c.SecurityKey = "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := f.cfg
			tc.change(&cfg)
			_, err := f.newClient(t, cfg).Notices(context.Background(), helpcenter.ListOptions{PageSize: 5})
			require.Error(t, err)
			assert.Equal(t, fault.Unauthorized, fault.CodeOf(err))
			assert.Contains(t, err.Error(), tc.want)
			var ae *helpcenter.APIError
			require.True(t, errors.As(err, &ae))
			assert.Equal(t, 400, ae.ResultCode)
			var se *fault.Error
			require.True(t, errors.As(err, &se))
			assert.Equal(t, 400, se.Data["result_code"])
		})
	}
	t.Run("a timestamp four minutes old is accepted", func(t *testing.T) {
		cfg := f.cfg
		cfg.Now = func() time.Time { return time.Now().Add(-4 * time.Minute) }
		_, err := f.newClient(t, cfg).Notices(context.Background(), helpcenter.ListOptions{PageSize: 5, Query: "a&b=c", CategoryID: 3})
		require.NoError(t, err)
	})
}

func TestUnknownNoticesAndServicesAreNotFound(t *testing.T) {
	f := start(t, 0)
	_, err := f.client.Notice(context.Background(), 999999, "")
	assert.Equal(t, fault.NotFound, fault.CodeOf(err))
	var ae *helpcenter.APIError
	require.True(t, errors.As(err, &ae))
	assert.Equal(t, 404, ae.ResultCode)

	cfg := f.cfg
	cfg.ServiceID = "no-such-center"
	_, err = f.newClient(t, cfg).Headings(context.Background(), "")
	assert.Equal(t, fault.NotFound, fault.CodeOf(err))
	assert.Contains(t, err.Error(), "no-such-center")

	_, _, err = f.client.Attachment(context.Background(), "nope", true)
	assert.Equal(t, fault.NotFound, fault.CodeOf(err))
	require.True(t, errors.As(err, &ae))
	assert.Equal(t, 9005, ae.ResultCode)
}

func TestDetailCountsReadsAndListsAttachmentsAndTags(t *testing.T) {
	f := start(t, 0)
	ctx := context.Background()
	var withFiles *helpcenter.NoticeDetail
	for n, err := range f.client.All(ctx, helpcenter.ListOptions{PageSize: 200}, 0) {
		require.NoError(t, err)
		d, err := f.client.Notice(ctx, n.ID, "ja")
		require.NoError(t, err)
		assert.Equal(t, n.ID, d.ID)
		assert.Equal(t, len(n.Tags), len(d.Tags))
		assert.Equal(t, len(d.Attachments) > 0, bool(d.HasAttachments))
		if len(d.Attachments) > 0 && len(d.Tags) > 0 {
			withFiles = d
			break
		}
	}
	require.NotNil(t, withFiles)
	again, err := f.client.Notice(ctx, withFiles.ID, "ja")
	require.NoError(t, err)
	assert.Equal(t, withFiles.ReadCount+1, again.ReadCount)
	assert.NotEmpty(t, again.Tags[0].Tag)
	assert.False(t, again.DisplayDt.Time.IsZero())
	assert.Regexp(t, `^\d{4}\.\d{2}\.\d{2}$`, again.DisplayDt.Raw)
}

func TestAttachmentsDownloadWithTheirNameTypeAndExactBytes(t *testing.T) {
	f := start(t, 0)
	ctx := context.Background()
	id, err := f.svc.AddNotice(simhc.NewNotice{Title: "price table", CategoryID: 4, Attachments: []simhc.NewAttachment{
		{FileName: "요금표 2026.csv", ContentType: "text/csv; charset=utf-8", Text: "item,price\nstandard,120\n"},
		{FileName: "logo.png", Data: []byte("\x89PNG\r\n\x1a\nfake")},
	}})
	require.NoError(t, err)
	d, err := f.client.Notice(ctx, id, "")
	require.NoError(t, err)
	require.Len(t, d.Attachments, 2)

	body, info, err := f.client.Attachment(ctx, d.Attachments[0].ID, true)
	require.NoError(t, err)
	data, err := io.ReadAll(body)
	require.NoError(t, body.Close())
	require.NoError(t, err)
	assert.Equal(t, "item,price\nstandard,120\n", string(data))
	assert.Equal(t, helpcenter.AttachmentInfo{FileName: "요금표 2026.csv", ContentType: "text/csv; charset=utf-8", Size: int64(len(data))}, info)
	assert.Equal(t, d.Attachments[0].Size, info.Size)

	_, info, err = f.client.Attachment(ctx, d.Attachments[1].ID, false)
	require.NoError(t, err)
	assert.Equal(t, "image/png", info.ContentType)

	for typ, want := range map[string]string{"download": "attachment;", "open": "inline;", "": "inline;"} {
		resp, err := http.Get(f.cfg.BaseURL + "/" + f.cfg.ServiceID + "/api/v2/notice/attachments/" + d.Attachments[1].ID + "?type=" + typ)
		require.NoError(t, err)
		resp.Body.Close()
		assert.True(t, strings.HasPrefix(resp.Header.Get("Content-Disposition"), want), "type=%s: %s", typ, resp.Header.Get("Content-Disposition"))
	}
}

func TestRetriesRideOutThrottlingAndStopAfterTheBound(t *testing.T) {
	f := start(t, 0)
	ctx := context.Background()
	f.srv.Faults.Add(sim.Fault{Service: "helpcenter", Status: 429, Count: 2, RetryAfter: 3})
	p, err := f.client.Notices(ctx, helpcenter.ListOptions{PageSize: 10})
	require.NoError(t, err)
	assert.Len(t, p.Notices, 10)
	assert.Equal(t, []time.Duration{3 * time.Second, 3 * time.Second}, f.sleeps, "Retry-After is honoured")
	assert.Len(t, f.listCalls(), 3)

	f.srv.Journal.Reset()
	f.sleeps = nil
	f.srv.Faults.Add(sim.Fault{Service: "helpcenter", Status: 503})
	_, err = f.client.Notices(ctx, helpcenter.ListOptions{PageSize: 10})
	require.Error(t, err)
	assert.Equal(t, fault.Unavailable, fault.CodeOf(err))
	assert.Contains(t, err.Error(), "gave up after 4 attempts")
	assert.Len(t, f.listCalls(), 4)
	require.Len(t, f.sleeps, 3)
	for i, d := range f.sleeps {
		assert.LessOrEqual(t, d, 200*time.Millisecond<<i, "backoff grows exponentially")
		assert.GreaterOrEqual(t, d, 100*time.Millisecond<<i)
	}

	f.srv.Faults.Clear()
	f.srv.Faults.Add(sim.Fault{Service: "helpcenter", Status: 503})
	cctx, cancel := context.WithCancel(ctx)
	cfg := f.cfg
	cfg.Sleep = func(ctx context.Context, d time.Duration) error { cancel(); return ctx.Err() }
	_, err = f.newClient(t, cfg).Notices(cctx, helpcenter.ListOptions{PageSize: 10})
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, fault.Cancelled, fault.CodeOf(err))
}

func TestNewNoticesAreFirstAndNewToday(t *testing.T) {
	f := start(t, 0)
	id, err := f.svc.AddNotice(simhc.NewNotice{Title: "[점검] 긴급 점검 안내", Content: "오늘 점검합니다", CategoryID: 2, Tags: []int{1, 5}})
	require.NoError(t, err)
	p, err := f.client.Notices(context.Background(), helpcenter.ListOptions{PageSize: 20})
	require.NoError(t, err)
	var got *helpcenter.Notice
	for i, n := range p.Notices {
		if !n.IsTop {
			got = &p.Notices[i]
			break
		}
	}
	require.NotNil(t, got)
	assert.Equal(t, id, got.ID, "the newest unpinned notice comes right after the pinned ones")
	assert.True(t, bool(got.IsNew))
	assert.Equal(t, helpcenter.TagList{"Kubernetes", "보안"}, got.Tags)
	assert.Equal(t, "점검", got.CategoryName)
}

func TestHeadingsAndTagsAreNamedInTheRequestedLanguage(t *testing.T) {
	f := start(t, 0)
	ctx := context.Background()
	hs, err := f.client.Headings(ctx, "en")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(hs), 6)
	assert.Equal(t, "Maintenance", hs[1].Name)
	assert.Equal(t, "점검", hs[1].Languages["ko"])
	for _, l := range []string{"ko", "en", "ja", "zh", "th"} {
		assert.NotEmpty(t, hs[0].Languages[l], l)
	}
	assert.Equal(t, `\`, hs[0].Path)
	ts, err := f.client.Tags(ctx, "ja")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(ts), 10)
	assert.Equal(t, "セキュリティ", ts[4].Tag)
}

func TestConfigFromReadsAConnectionAndNamesWhatIsMissing(t *testing.T) {
	cfg, err := helpcenter.ConfigFrom(map[string]any{"base_url": "https://x.oc.nhncloud.com", "service_id": "svc"})
	require.NoError(t, err)
	assert.Equal(t, "ko", cfg.Language)
	_, err = helpcenter.ConfigFrom(map[string]any{"base_url": "https://x"})
	assert.ErrorContains(t, err, "service_id is missing")
	_, err = helpcenter.ConfigFrom(map[string]any{"service_id": "s"})
	assert.ErrorContains(t, err, "base_url is missing")
	_, err = helpcenter.ConfigFrom(map[string]any{"base_url": "https://x", "service_id": []string{"a"}})
	assert.ErrorContains(t, err, "service_id must be a string")
	_, err = helpcenter.New(helpcenter.Config{BaseURL: "ftp://x", ServiceID: "s"})
	assert.Equal(t, fault.Invalid, fault.CodeOf(err))
	_, err = helpcenter.New(helpcenter.Config{BaseURL: "https://x"})
	assert.ErrorContains(t, err, "service ID is empty")
}

func TestSignaturesFollowTheWallClockWhateverTheSimulatedTime(t *testing.T) {
	f := start(t, 0)
	f.srv.Clock.Advance(48 * time.Hour) // a rehearsal days ahead, or a fast simulator
	page, err := f.client.Notices(context.Background(), helpcenter.ListOptions{PageSize: 5})
	require.NoError(t, err, "a client signing with real time is accepted")
	assert.Len(t, page.Notices, 5)
}
