package helpcenter

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSummariesDecodeEitherFormOfEachQuirkyField(t *testing.T) {
	for _, tc := range []struct {
		name string
		json string
		want func(t *testing.T, n Notice)
	}{
		{"the dotted display date, string isNew, tags as text",
			`{"noticeId":1,"displayDt":"2026.03.14","isNew":"true","tagStr":"Kubernetes, 보안","updatedDt":1773446400000,"isTop":false}`,
			func(t *testing.T, n Notice) {
				assert.Equal(t, time.Date(2026, 3, 14, 0, 0, 0, 0, Seoul()), n.DisplayDt.Time)
				assert.Equal(t, "2026.03.14", n.DisplayDt.Raw)
				assert.True(t, bool(n.IsNew))
				assert.Equal(t, TagList{"Kubernetes", "보안"}, n.Tags)
				assert.Equal(t, int64(1773446400000), n.UpdatedDt.Time().UnixMilli())
			}},
		{"the stated display format, boolean isNew, no tag, numeric-string updatedDt",
			`{"noticeId":2,"displayDt":"20260314093015","isNew":false,"updatedDt":"1773446400000","isTop":"Y"}`,
			func(t *testing.T, n Notice) {
				assert.Equal(t, time.Date(2026, 3, 14, 9, 30, 15, 0, Seoul()), n.DisplayDt.Time)
				assert.False(t, bool(n.IsNew))
				assert.Nil(t, n.Tags)
				assert.Equal(t, EpochMillis(1773446400000), n.UpdatedDt)
				assert.True(t, bool(n.IsTop))
			}},
		{"tagStr with its stated Integer type and null fields",
			`{"noticeId":3,"displayDt":null,"isNew":null,"tagStr":12,"updatedDt":null}`,
			func(t *testing.T, n Notice) {
				assert.Equal(t, TagList{"12"}, n.Tags)
				assert.True(t, n.DisplayDt.Time.IsZero())
				assert.True(t, n.UpdatedDt.Time().IsZero())
			}},
		{"an unknown display form keeps the raw text",
			`{"noticeId":4,"displayDt":"last tuesday"}`,
			func(t *testing.T, n Notice) {
				assert.Equal(t, "last tuesday", n.DisplayDt.Raw)
				assert.True(t, n.DisplayDt.Time.IsZero())
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n Notice
			require.NoError(t, json.Unmarshal([]byte(tc.json), &n))
			tc.want(t, n)
		})
	}
}

func TestAttachmentFlagAcceptsYNAndBooleans(t *testing.T) {
	for in, want := range map[string]bool{`"Y"`: true, `"N"`: false, `true`: true, `false`: false, `"true"`: true, `"y"`: true, `null`: false} {
		var d NoticeDetail
		require.NoError(t, json.Unmarshal([]byte(`{"attachmentYn":`+in+`}`), &d), in)
		assert.Equal(t, want, bool(d.HasAttachments), in)
	}
	var d NoticeDetail
	assert.Error(t, json.Unmarshal([]byte(`{"attachmentYn":"maybe"}`), &d))
}

func TestDisplayTimesAreReadInTheConfiguredLocation(t *testing.T) {
	utc := ParseDisplayTime("20260314093015", time.UTC)
	assert.Equal(t, time.Date(2026, 3, 14, 9, 30, 15, 0, time.UTC), utc.Time)
	kst := ParseDisplayTime("20260314093015", nil)
	assert.Equal(t, 9*time.Hour, utc.Time.Sub(kst.Time))
}
