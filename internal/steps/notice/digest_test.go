package notice_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/sim"
	simhc "github.com/runbook/runbook/internal/sim/helpcenter"
	"github.com/runbook/runbook/internal/steps"
	"github.com/runbook/runbook/internal/steps/stepstest"
)

// stillHelpCenter is the simulator with its clock standing still (it moves
// only by Advance), holding no notices but those a test adds: update times
// are exact to the millisecond.
func stillHelpCenter(t *testing.T) *helpCenter {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := sim.Start(ctx, sim.Options{Services: []string{"helpcenter"}, Speed: 1e-12,
		Start: time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC)})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close(); cancel() })
	svc, ok := srv.Service("helpcenter").(*simhc.Service)
	require.True(t, ok)
	svc.Reset(0)
	return &helpCenter{srv: srv, svc: svc, conn: srv.Connections()["helpcenter"]}
}

// digester runs notice.digest as successive runs of one playbook do: one
// state store (the cursors), one playbook directory, the simulator's clock.
type digester struct {
	hc   *helpCenter
	host *stepstest.Host
	dir  string
}

func newDigester(t *testing.T, hc *helpCenter) *digester {
	host := stepstest.TestHost()
	host.Connections["helpcenter"] = hc.conn
	return &digester{hc: hc, host: host, dir: t.TempDir()}
}

func (g *digester) run(t *testing.T, with map[string]any) (steps.Outputs, error) {
	t.Helper()
	d, c := g.hc.call(t, "notice.digest", with)
	c.Host, c.Dir, c.Now = g.host, g.dir, g.hc.srv.Clock.Now
	return d.Run(context.Background(), c)
}

// file runs a digest written to digest.txt (mode write) and returns what
// the file holds afterwards ("" when nothing was written).
func (g *digester) file(t *testing.T, with map[string]any) (string, steps.Outputs) {
	t.Helper()
	w := map[string]any{"file": "digest.txt", "file_mode": "write", "format": "text"}
	for k, v := range with {
		w[k] = v
	}
	_ = os.Remove(filepath.Join(g.dir, "digest.txt"))
	out, err := g.run(t, w)
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(g.dir, "digest.txt"))
	if os.IsNotExist(err) {
		return "", out
	}
	require.NoError(t, err)
	return string(b), out
}

// listCalls counts the list pages the digest read from the help center.
func (h *helpCenter) listCalls() int {
	return len(h.srv.Journal.Calls("helpcenter", "GET", "/"+simhc.DefaultServiceID+"/api/v2/notice/list.json"))
}

// titles is a template listing each notice's title on a line.
const titles = "{{range .Notices}}{{.Title}}\n{{end}}"

func TestDigestFirstRunDecidesWhatCountsAsNew(t *testing.T) {
	cases := []struct {
		name, firstRun string
		want           string
	}{
		{"all posts every notice", "all", "today\nyesterday\nlast week\n"},
		{"since:7d posts the notices of the last seven days", "since:7d", "today\nyesterday\n"},
		{"since:36h reaches back a day and a half", "since:36h", "today\nyesterday\n"},
		{"since:1h posts only the newest", "since:1h", "today\n"},
		{"none posts nothing and remembers where things stand", "none", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hc := stillHelpCenter(t)
			hc.add(t, simhc.NewNotice{Title: "last week"})
			hc.srv.Clock.Advance(6 * 24 * time.Hour)
			hc.add(t, simhc.NewNotice{Title: "yesterday"})
			hc.srv.Clock.Advance(24 * time.Hour)
			hc.add(t, simhc.NewNotice{Title: "today"})
			hc.srv.Clock.Advance(time.Minute)
			g := newDigester(t, hc)

			got, _ := g.file(t, map[string]any{"first_run": tc.firstRun, "template": titles})
			assert.Equal(t, tc.want, got)

			hc.add(t, simhc.NewNotice{Title: "later"})
			got, _ = g.file(t, map[string]any{"first_run": tc.firstRun, "template": titles})
			assert.Equal(t, "later\n", got, "the next run posts only what came after")
		})
	}
}

func TestDigestFirstRunSinceExcludesANoticeExactlyAtItsStart(t *testing.T) {
	hc := stillHelpCenter(t)
	hc.add(t, simhc.NewNotice{Title: "a day ago to the millisecond"})
	hc.srv.Clock.Advance(time.Millisecond)
	hc.add(t, simhc.NewNotice{Title: "a millisecond later"})
	hc.srv.Clock.Advance(24*time.Hour - time.Millisecond)
	got, _ := newDigester(t, hc).file(t, map[string]any{"first_run": "since:1d", "template": titles})
	assert.Equal(t, "a millisecond later\n", got)
}

func TestDigestTemplateSeesTheCursorTime(t *testing.T) {
	cases := []struct {
		name, firstRun, want string
	}{
		{"a first run with all has no time before it", "all", "since  (1)"},
		{"a first run with since starts at that time", "since:2d", "since 2026-05-02 (1)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hc := stillHelpCenter(t)
			hc.add(t, simhc.NewNotice{Title: "one"})
			got, _ := newDigester(t, hc).file(t, map[string]any{"first_run": tc.firstRun,
				"template": "since {{date .Since}} ({{.Count}})"})
			assert.Equal(t, tc.want+"\n", got)
		})
	}
}

func TestDigestSaysHowManyMoreNoticesItLeftOut(t *testing.T) {
	cases := []struct {
		name       string
		added, max int
		lines      int
		more       string
	}{
		{"three of five are left out", 5, 2, 2, "... and 3 more\n"},
		{"one left out", 3, 2, 2, "... and 1 more\n"},
		{"all shown: no summary line", 2, 2, 2, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hc := stillHelpCenter(t)
			for i := range tc.added {
				hc.add(t, simhc.NewNotice{Title: fmt.Sprintf("notice %d", i)})
				hc.srv.Clock.Advance(time.Second)
			}
			got, out := newDigester(t, hc).file(t, map[string]any{"first_run": "all", "max_notices": tc.max})
			assert.True(t, strings.HasPrefix(got, fmt.Sprintf("%d new help-center notices\n", tc.added)), got)
			assert.Equal(t, tc.lines, strings.Count(got, "\n- "), got)
			assert.Contains(t, got, fmt.Sprintf("notice %d", tc.added-1), "the newest is shown")
			if tc.more == "" {
				assert.NotContains(t, got, "more")
			} else {
				assert.True(t, strings.HasSuffix(got, tc.more), got)
			}
			assert.EqualValues(t, tc.added, out["count"])
			assert.Len(t, out["notice_ids"], tc.added, "every new notice is remembered, shown or not")
		})
	}
}

func TestDigestReadsAtMostMaxScanNotices(t *testing.T) {
	cases := []struct {
		name          string
		notices, scan int
		posted, pages int
	}{
		{"max_scan below one page reads that many", 5, 3, 3, 1},
		{"max_scan of exactly the notices there are", 5, 5, 5, 1},
		{"max_scan across pages reads every page it needs", 450, 250, 250, 2},
		{"max_scan of a whole page stops after it", 450, 200, 200, 1},
		{"max_scan above what there is reads every page once", 450, 1000, 450, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hc := stillHelpCenter(t)
			for i := range tc.notices {
				hc.add(t, simhc.NewNotice{Title: fmt.Sprintf("n%d", i)})
				hc.srv.Clock.Advance(time.Second)
			}
			got, out := newDigester(t, hc).file(t, map[string]any{"first_run": "all", "max_scan": tc.scan,
				"max_notices": 1000, "template": titles})
			lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
			require.Len(t, lines, tc.posted)
			for i, l := range lines {
				assert.Equal(t, fmt.Sprintf("n%d", tc.notices-1-i), l, "newest first, none twice, none skipped")
			}
			assert.EqualValues(t, tc.posted, out["count"])
			assert.Equal(t, tc.pages, hc.listCalls(), "pages read from the help center")
		})
	}
}

func TestDigestStopsReadingAtTheCursor(t *testing.T) {
	hc := startHelpCenter(t)
	hc.svc.Reset(450) // spread over half a year: most are far below the cursor
	g := newDigester(t, hc)
	_, err := g.run(t, map[string]any{"file": "d.txt", "first_run": "none"})
	require.NoError(t, err)
	require.Equal(t, 1, hc.listCalls(), "a first run with none reads one page")

	hc.add(t, simhc.NewNotice{Title: "New prices"})
	hc.srv.Journal.Reset()
	got, out := g.file(t, map[string]any{"template": titles})
	assert.Equal(t, "New prices\n", got)
	assert.EqualValues(t, 1, out["count"])
	assert.Equal(t, 1, hc.listCalls(), "the first page already reaches notices older than the cursor")
}

func TestDigestListsInTheLanguageAsked(t *testing.T) {
	cases := []struct {
		name, language, want string
	}{
		{"the language param wins", "en", "en"},
		{"another language", "ja", "ja"},
		{"without it, the connection's", "", "ko"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hc := startHelpCenter(t)
			hc.svc.Reset(5)
			with := map[string]any{"all": true, "page_size": 200}
			if tc.language != "" {
				with["language"] = tc.language
			}
			d, c := hc.call(t, "notice.list", with)
			listed, err := d.Run(context.Background(), c)
			require.NoError(t, err)
			var want strings.Builder
			for _, n := range listed["notices"].([]any) {
				want.WriteString(n.(map[string]any)["title"].(string) + "\n")
			}

			with = map[string]any{"first_run": "all", "template": "{{.Language}}\n" + titles}
			if tc.language != "" {
				with["language"] = tc.language
			}
			got, _ := newDigester(t, hc).file(t, with)
			lines := strings.SplitN(got, "\n", 2)
			require.Len(t, lines, 2)
			assert.Equal(t, tc.want, lines[0])
			assert.ElementsMatch(t, strings.Split(want.String(), "\n"), strings.Split(lines[1], "\n"))
		})
	}
}

func TestDigestWithTheConnectionsLanguageNamedSharesItsCursor(t *testing.T) {
	hc := startHelpCenter(t)
	g := newDigester(t, hc)
	_, first := g.file(t, map[string]any{"first_run": "none"})
	hc.add(t, simhc.NewNotice{Title: "Once only"})

	got, _ := g.file(t, map[string]any{"language": "ko"})
	assert.Contains(t, got, "Once only")
	got, out := g.file(t, map[string]any{})
	assert.Empty(t, got, "language ko is what the connection lists in: the same digest, nothing new")
	assert.EqualValues(t, 0, out["count"])
	assert.Equal(t, first["cursor"].(map[string]any)["key"], out["cursor"].(map[string]any)["key"])

	got, _ = g.file(t, map[string]any{"language": "en", "first_run": "all"})
	assert.Contains(t, got, "Once only", "another language keeps a cursor of its own")
}

func TestDigestCursorRemembersTheNewestNotices(t *testing.T) {
	hc := stillHelpCenter(t)
	old := hc.add(t, simhc.NewNotice{Title: "two weeks ago"})
	hc.srv.Clock.Advance(14 * 24 * time.Hour)
	a := hc.add(t, simhc.NewNotice{Title: "a"})
	b := hc.add(t, simhc.NewNotice{Title: "b, the same millisecond"})
	_, out := newDigester(t, hc).file(t, map[string]any{"first_run": "all", "template": titles})
	assert.ElementsMatch(t, []any{float64(a), float64(b), float64(old)}, toFloats(out["notice_ids"]))

	cur := out["cursor"].(map[string]any)
	after := cur["after"].(map[string]any)
	now := hc.srv.Clock.Now()
	assert.Equal(t, now.UnixMilli(), after["updated_ms"])
	assert.Equal(t, now.UTC().Format(time.RFC3339Nano), after["updated_at"])
	assert.ElementsMatch(t, []any{float64(a), float64(b)}, toFloats(after["ids"]), "both notices of the newest millisecond")
	assert.Equal(t, 2, after["seen"], "the notice two weeks back is below the cursor's floor: not kept")
	before := cur["before"].(map[string]any)
	assert.Equal(t, "", before["updated_at"], "no cursor before a first run with all")
	assert.EqualValues(t, 0, before["updated_ms"])
}

func TestDigestHTMLEscapesWhatNoticesSay(t *testing.T) {
	cases := []struct {
		name, format, template, want string
	}{
		{"html with a template escapes a title", "html", titles, "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more\n"},
		{"html by default escapes a title", "html", "", "<li><strong>공지사항</strong> &lt;script&gt;alert(1)&lt;/script&gt; &amp; more · "},
		{"text with a template keeps a title as it is", "text", titles, "<script>alert(1)</script> & more\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hc := stillHelpCenter(t)
			hc.add(t, simhc.NewNotice{Title: "<script>alert(1)</script> & more"})
			with := map[string]any{"first_run": "all", "format": tc.format}
			if tc.template != "" {
				with["template"] = tc.template
			}
			got, _ := newDigester(t, hc).file(t, with)
			assert.Contains(t, got, tc.want)
			if tc.format == "html" {
				assert.NotContains(t, got, "<script>")
			}
		})
	}
}

func TestDigestIdempotencyKeyNamesTheDigestNotTheRun(t *testing.T) {
	hc := stillHelpCenter(t)
	rcv := newReceiver(t)
	g := newDigester(t, hc)
	post := func(runKey string, with map[string]any) (steps.Outputs, error) {
		t.Helper()
		d, c := hc.call(t, "notice.digest", with)
		c.Host, c.Dir, c.Now, c.IdempotencyKey = g.host, g.dir, hc.srv.Clock.Now, runKey
		return d.Run(context.Background(), c)
	}
	with := map[string]any{"url": rcv.URL, "first_run": "all"}

	t.Run("a later run repeating a digest that failed sends the same key", func(t *testing.T) {
		hc.add(t, simhc.NewNotice{Title: "Maintenance"})
		rcv.fail = 1
		_, err := post("run-1/digest", with)
		require.Error(t, err)
		out, err := post("run-2/digest", with)
		require.NoError(t, err)
		got := rcv.got()
		require.Len(t, got, 2)
		assert.Equal(t, got[0].key, got[1].key, "the receiver can drop the repeat")
		assert.Equal(t, got[0].body, got[1].body)
		assert.Equal(t, got[1].key, out["idempotency_key"])
	})
	t.Run("empty digests of two runs are two digests", func(t *testing.T) {
		with := map[string]any{"url": rcv.URL, "post_empty": true, "format": "text"}
		first, err := post("run-3/digest", with)
		require.NoError(t, err)
		second, err := post("run-4/digest", with)
		require.NoError(t, err)
		got := rcv.got()
		require.Len(t, got, 4)
		assert.Equal(t, "0 new help-center notices", strings.TrimSpace(got[3].body["text"].(string)))
		assert.Equal(t, true, second["posted"])
		assert.EqualValues(t, 0, second["count"])
		assert.NotEqual(t, got[2].key, got[3].key, "the receiver must not drop the second")
		assert.NotEqual(t, first["idempotency_key"], second["idempotency_key"])
	})
}

func TestDigestStopsAtThePageThatReachesItsStart(t *testing.T) {
	cases := []struct {
		name  string
		old   time.Duration // how long before the digest's start the last notice is
		pages int
	}{
		{"a notice at its start ends the reading", 0, 1},
		{"a notice before its start ends the reading", time.Hour, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hc := stillHelpCenter(t)
			hc.add(t, simhc.NewNotice{Title: "long ago"}) // on page 2
			hc.srv.Clock.Advance(24 * time.Hour)
			hc.add(t, simhc.NewNotice{Title: "at the start"})
			hc.srv.Clock.Advance(tc.old + time.Millisecond)
			for i := range 199 {
				hc.add(t, simhc.NewNotice{Title: fmt.Sprintf("n%d", i)})
				hc.srv.Clock.Advance(time.Millisecond)
			}
			since := hc.srv.Clock.Now().Sub(hc.svcUpdated(t, "at the start")) - tc.old
			got, out := newDigester(t, hc).file(t, map[string]any{"first_run": "since:" + since.String(), "template": "{{.Count}}"})
			assert.Equal(t, "199\n", got)
			assert.EqualValues(t, 199, out["count"])
			assert.Equal(t, tc.pages, hc.listCalls(), "page 2 is older still: not read")
		})
	}
}

// svcUpdated is the update time the help center lists for the notice titled title.
func (h *helpCenter) svcUpdated(t *testing.T, title string) time.Time {
	t.Helper()
	d, c := h.call(t, "notice.list", map[string]any{"all": true, "page_size": 200, "query": title})
	out, err := d.Run(context.Background(), c)
	require.NoError(t, err)
	require.Len(t, out["notices"], 1)
	at, err := time.Parse(time.RFC3339, out["notices"].([]any)[0].(map[string]any)["updated_at"].(string))
	require.NoError(t, err)
	h.srv.Journal.Reset()
	return at
}

func TestDigestFindsANoticeThatShowsUpLateBehindAFullPage(t *testing.T) {
	hc := stillHelpCenter(t)
	for i := range 200 {
		hc.add(t, simhc.NewNotice{Title: fmt.Sprintf("n%d", i)})
		hc.srv.Clock.Advance(time.Second)
	}
	g := newDigester(t, hc)
	_, out := g.file(t, map[string]any{"first_run": "all"})
	require.EqualValues(t, 200, out["count"])

	// A notice scheduled earlier becomes visible now, with an update time
	// older than every notice on the first page, but inside the cursor's
	// lookback.
	hc.srv.Clock.Advance(-time.Hour)
	hc.add(t, simhc.NewNotice{Title: "scheduled an hour ago"})
	got, out := g.file(t, map[string]any{"template": titles})
	assert.Equal(t, "scheduled an hour ago\n", got)
	assert.EqualValues(t, 1, out["count"])
}

func TestDigestOrdersNoticesOfOneMillisecondByID(t *testing.T) {
	hc := stillHelpCenter(t)
	// The help center lists notices updated together by display date: the
	// digest lists them newest ID first all the same.
	a := hc.add(t, simhc.NewNotice{Title: "displayed later", DisplayDt: "2026.05.03"})
	b := hc.add(t, simhc.NewNotice{Title: "displayed earlier", DisplayDt: "2026.05.01"})
	hc.srv.Clock.Advance(time.Second)
	c := hc.add(t, simhc.NewNotice{Title: "updated last", DisplayDt: "2026.04.01"})
	got, out := newDigester(t, hc).file(t, map[string]any{"first_run": "all", "template": titles})
	assert.Equal(t, "updated last\ndisplayed earlier\ndisplayed later\n", got)
	assert.Equal(t, []any{float64(c), float64(b), float64(a)}, toFloats(out["notice_ids"]))
}

func TestDigestResumedLateNeverMovesTheCursorBack(t *testing.T) {
	hc := stillHelpCenter(t)
	rcv := newReceiver(t)
	g := newDigester(t, hc)
	with := map[string]any{"url": rcv.URL, "first_run": "none", "format": "text"}
	_, err := g.run(t, with)
	require.NoError(t, err)

	hc.add(t, simhc.NewNotice{Title: "first"})
	hc.srv.Clock.Advance(time.Second)
	rcv.fail = 1
	d, stalled := hc.call(t, "notice.digest", with)
	stalled.Host, stalled.Dir, stalled.Now = g.host, g.dir, hc.srv.Clock.Now
	_, err = d.Run(context.Background(), stalled)
	require.Error(t, err, "the receiver answered 503: this digest waits for its retry")
	promised := g.host.LastCheckpoint()

	hc.add(t, simhc.NewNotice{Title: "second"})
	hc.srv.Clock.Advance(time.Second)
	out, err := g.run(t, with)
	require.NoError(t, err)
	require.EqualValues(t, 2, out["count"], "another run posts both")

	stalled.Resume, stalled.Attempt = promised, 2
	out, err = d.Run(context.Background(), stalled)
	require.NoError(t, err)
	assert.EqualValues(t, 1, out["count"], "the retry sends what it promised")

	out, err = g.run(t, with)
	require.NoError(t, err)
	assert.Equal(t, false, out["posted"], "\"second\" is not posted a second time")
	assert.EqualValues(t, 0, out["count"])
	assert.Len(t, rcv.got(), 3, "the failed post, the other run's and the retry")
}

func TestDigestOutputIsCappedAt64KiBWhileTheTargetGetsItAll(t *testing.T) {
	cases := []struct {
		name, template, title string
		capped                bool
	}{
		{"a digest of exactly 64 KiB is output whole", strings.Repeat("x", 64<<10), "", false},
		{"a longer one is cut", "{{.Title}}" + strings.Repeat("x", 64<<10-10), "0123456789ab", true},
		{"it is cut between characters, not inside one", "{{.Title}}" + strings.Repeat("가", (64<<10-10)/3), "0123456789ab", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hc := stillHelpCenter(t)
			hc.add(t, simhc.NewNotice{Title: "one"})
			with := map[string]any{"first_run": "all", "template": tc.template}
			if tc.title != "" {
				with["title"] = tc.title
			}
			got, out := newDigester(t, hc).file(t, with)
			whole := strings.TrimSuffix(got, "\n")
			digest := out["digest"].(string)
			if !tc.capped {
				assert.Equal(t, whole, digest)
				return
			}
			assert.Greater(t, len(whole), 64<<10)
			assert.True(t, strings.HasSuffix(digest, "…"))
			cut := strings.TrimSuffix(digest, "…")
			assert.True(t, utf8.ValidString(cut), "no character is broken")
			assert.True(t, strings.HasPrefix(whole, cut))
			assert.LessOrEqual(t, len(cut), 64<<10)
			assert.Greater(t, len(cut), 64<<10-3)
		})
	}
}

func TestDigestPlanShowsThePostOnlyForAURL(t *testing.T) {
	cases := []struct {
		name  string
		with  map[string]any
		calls []string
	}{
		{"a url target", map[string]any{"url": "https://hooks.example.com/services/SECRET"},
			[]string{"GET /{serviceId}/api/v2/notice/list.json", "POST https://hooks.example.com"}},
		{"a file target", map[string]any{"file": "d.md"}, []string{"GET /{serviceId}/api/v2/notice/list.json"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := desc(t, "notice.digest")
			p, _, problems := d.Decode(tc.with)
			require.Empty(t, problems)
			var got []string
			for _, c := range d.Plan(p) {
				got = append(got, c.Method+" "+c.Path)
			}
			assert.Equal(t, tc.calls, got)
		})
	}
}

func TestDigestFileThatCannotBeWrittenFailsAndKeepsTheCursor(t *testing.T) {
	for _, mode := range []string{"write", "append"} {
		t.Run("file_mode "+mode, func(t *testing.T) {
			hc := stillHelpCenter(t)
			hc.add(t, simhc.NewNotice{Title: "one"})
			g := newDigester(t, hc)
			require.NoError(t, os.MkdirAll(filepath.Join(g.dir, "digest.txt", "in-the-way"), 0o700))
			with := map[string]any{"file": "digest.txt", "file_mode": mode, "first_run": "all"}
			_, err := g.run(t, with)
			require.Error(t, err, "digest.txt is a directory")
			// Named as given, or resolved below the playbook directory.
			assert.Regexp(t, `"digest.txt"|`+regexp.QuoteMeta(filepath.Join(g.dir, "digest.txt")+": "), err.Error())

			require.NoError(t, os.RemoveAll(filepath.Join(g.dir, "digest.txt")))
			out, err := g.run(t, with)
			require.NoError(t, err)
			assert.EqualValues(t, 1, out["count"], "the notice is still new")
		})
	}
}

func TestDigestFirstRunNoneTakesEverythingBeyondItsPageAsSeen(t *testing.T) {
	cases := []struct {
		name    string
		notices int
		spacing time.Duration
	}{
		{"more notices in two weeks than one page holds", 250, time.Minute},
		{"a page reaching further back than two weeks", 250, 2 * time.Hour},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hc := stillHelpCenter(t)
			for i := range tc.notices {
				hc.add(t, simhc.NewNotice{Title: fmt.Sprintf("n%d", i)})
				hc.srv.Clock.Advance(tc.spacing)
			}
			g := newDigester(t, hc)
			got, _ := g.file(t, map[string]any{"first_run": "none"})
			require.Empty(t, got)
			got, out := g.file(t, map[string]any{"first_run": "none"})
			assert.Empty(t, got, "nothing is new after a first run that posted nothing")
			assert.EqualValues(t, 0, out["count"])

			hc.add(t, simhc.NewNotice{Title: "fresh"})
			got, _ = g.file(t, map[string]any{"template": titles})
			assert.Equal(t, "fresh\n", got)
		})
	}
}
