package notice

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func at(ms int64) time.Time { return time.UnixMilli(ms) }

func TestWatermarkTellsNewFromSeen(t *testing.T) {
	day := int64(24 * 3600 * 1000)
	now := 100 * day
	w := watermark{}
	a := Notice{ID: 1, UpdatedAt: at(now)}
	b := Notice{ID: 2, UpdatedAt: at(now)}
	c := Notice{ID: 3, UpdatedAt: at(now - day)}
	pinnedOld := Notice{ID: 4, Pinned: true, UpdatedAt: at(now - 30*day)}
	assert.True(t, w.newer(a))
	w = w.add(a)
	assert.False(t, w.newer(a), "a seen notice is not new")
	assert.True(t, w.newer(b), "another notice at the same millisecond is new")
	w = w.add(b)
	assert.Equal(t, []int64{1, 2}, w.ids())
	assert.True(t, w.newer(c), "a notice that shows up late with an older time is still caught")
	w = w.add(c)
	assert.False(t, w.newer(c))
	assert.False(t, w.newer(pinnedOld), "below the floor nothing is new, pinned or not")
	edited := Notice{ID: 3, UpdatedAt: at(now + 1)}
	assert.True(t, w.newer(edited), "an edited notice comes back")
	assert.Equal(t, w.UpdatedMs, w.merge(watermark{UpdatedMs: 10}).UpdatedMs, "the watermark never moves back")
	later := w.add(Notice{ID: 9, UpdatedAt: at(now + 20*day)})
	assert.NotContains(t, later.Seen, int64(1), "IDs below the floor are forgotten")
	assert.False(t, later.newer(a))

	b2, err := json.Marshal(later)
	require.NoError(t, err)
	back, ok, err := parseWatermark(b2)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, later, back)
}

func TestFirstRunParsing(t *testing.T) {
	for in, want := range map[string]time.Duration{"since:7d": 7 * 24 * time.Hour, "since:36h": 36 * time.Hour, "all": 0, "none": 0} {
		_, d, err := parseFirstRun(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, d, in)
	}
	for _, in := range []string{"", "since:", "since:-1h", "since:0d", "week"} {
		_, _, err := parseFirstRun(in)
		assert.Error(t, err, in)
	}
}

func TestCursorKeysSeparateFiltersAndNames(t *testing.T) {
	k := cursorKey("helpcenter", "svc", "", "ko", 0, 0, "")
	assert.Regexp(t, `^notice\.digest/helpcenter/svc/[0-9a-f]{16}$`, k)
	assert.NotEqual(t, k, cursorKey("helpcenter", "svc", "", "en", 0, 0, ""))
	assert.NotEqual(t, k, cursorKey("helpcenter", "svc", "", "ko", 1, 0, ""))
	assert.NotEqual(t, k, cursorKey("helpcenter", "svc", "slack", "ko", 0, 0, ""))
	assert.Equal(t, k, cursorKey("helpcenter", "svc", "", "ko", 0, 0, ""))
}

func TestPayloadShapes(t *testing.T) {
	decode := func(b []byte) map[string]any {
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m))
		return m
	}
	b, err := payload(&digestParams{BodyShape: "text"}, "digest", "T", 2)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"text": "digest"}, decode(b))

	b, err = payload(&digestParams{BodyShape: "slack"}, "digest", "T", 2)
	require.NoError(t, err)
	m := decode(b)
	assert.Equal(t, "T", m["text"])
	assert.Equal(t, "digest", m["blocks"].([]any)[0].(map[string]any)["text"].(map[string]any)["text"])

	b, err = payload(&digestParams{BodyShape: "custom", Body: map[string]any{
		"msg": "{{title}}: {{digest}}", "n": "{{count}}", "list": []any{"{{digest}}", 3},
	}}, "line \"quoted\"", "T", 2)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"msg": "T: line \"quoted\"", "n": "2", "list": []any{"line \"quoted\"", 3.0}}, decode(b))
}

func TestRenderFormats(t *testing.T) {
	data := DigestData{Title: "2 new", Count: 3, More: 1, Notices: []Notice{
		{ID: 7, Title: "DB <maintenance> *now*", Category: "Maintenance", Pinned: true, DisplayAt: time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC), URL: "https://hc.example/7"},
		{ID: 6, Title: "Prices", Category: "Billing", DisplayAt: time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC)},
	}}
	md, err := render("markdown", "", data)
	require.NoError(t, err)
	assert.Contains(t, md, `[DB \<maintenance\> \*now\*](https://hc.example/7) · 2026-03-04`)
	assert.Contains(t, md, "and 1 more")
	html, err := render("html", "", data)
	require.NoError(t, err)
	assert.Contains(t, html, "DB &lt;maintenance&gt; *now*")
	txt, err := render("text", "", data)
	require.NoError(t, err)
	assert.Contains(t, txt, "- [pinned] [Maintenance] DB <maintenance> *now* (2026-03-04) https://hc.example/7\n")
	custom, err := render("text", "{{.Count}}:{{range .Notices}} {{.ID}}{{end}}", data)
	require.NoError(t, err)
	assert.Equal(t, "3: 7 6", custom)
	_, err = render("html", "{{.Nope}}", data)
	assert.Error(t, err)
}

func TestWithoutACursorEveryNoticeIsNewEvenOneWithoutDates(t *testing.T) {
	undated := Notice{ID: 5}
	dated := Notice{ID: 6, UpdatedAt: at(1000)}
	cases := []struct {
		name string
		w    watermark
		n    Notice
		new  bool
	}{
		{"no cursor: a notice without any date", watermark{}, undated, true},
		{"no cursor: a dated notice", watermark{}, dated, true},
		{"a cursor from since: a notice without any date is older", watermark{UpdatedMs: 500, Floor: 500}, undated, false},
		{"a cursor from since: a notice after it", watermark{UpdatedMs: 500, Floor: 500}, dated, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.new, tc.w.newer(tc.n))
		})
	}
}
