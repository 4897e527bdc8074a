package notice_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/fault"
	simhc "github.com/runbook/runbook/internal/sim/helpcenter"
	"github.com/runbook/runbook/internal/steps/stepstest"
)

func TestDigestPostSucceedsOnAny2xxOnly(t *testing.T) {
	cases := []struct {
		name   string
		status int
		code   fault.Code // "" for success
	}{
		{"201 Created is success", http.StatusCreated, ""},
		{"299 is still success", 299, ""},
		{"a redirect is not followed and not success", http.StatusFound, fault.CodeForHTTPStatus(http.StatusFound)},
		{"a refusal is an error", http.StatusBadRequest, fault.Invalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hc := stillHelpCenter(t)
			hc.add(t, simhc.NewNotice{Title: "one"})
			var posts atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				posts.Add(1)
				if tc.status == http.StatusFound {
					w.Header().Set("Location", "/elsewhere")
				}
				w.WriteHeader(tc.status)
			}))
			defer srv.Close()
			g := newDigester(t, hc)
			out, err := g.run(t, map[string]any{"url": srv.URL + "/hooks/T000/SECRET", "first_run": "all"})
			assert.EqualValues(t, 1, posts.Load(), "one post, no redirect followed")
			if tc.code == "" {
				require.NoError(t, err)
				assert.Equal(t, true, out["posted"])
				return
			}
			require.Error(t, err)
			assert.Equal(t, tc.code, fault.CodeOf(err))
			assert.Contains(t, err.Error(), "post the digest to "+srv.URL+": ")
			assert.NotContains(t, err.Error(), "SECRET", "the webhook's secret path stays out of errors")
			out, err = g.run(t, map[string]any{"file": "d.txt", "first_run": "all"})
			require.NoError(t, err)
			assert.EqualValues(t, 1, out["count"], "the cursor did not move")
		})
	}
}

func TestDigestToSlackKeepsTheSectionWithinItsLimit(t *testing.T) {
	cases := []struct {
		name  string
		runes int
		cut   bool
	}{
		{"3000 characters fit", 3000, false},
		{"3001 are cut to 3000 with an ellipsis", 3001, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hc := stillHelpCenter(t)
			hc.add(t, simhc.NewNotice{Title: "one"})
			rcv := newReceiver(t)
			text := strings.Repeat("가", tc.runes)
			_, err := newDigester(t, hc).run(t, map[string]any{"url": rcv.URL, "first_run": "all", "body_shape": "slack",
				"template": text, "title": "T"})
			require.NoError(t, err)
			got := rcv.got()
			require.Len(t, got, 1)
			assert.Equal(t, "T", got[0].body["text"])
			block := got[0].body["blocks"].([]any)[0].(map[string]any)["text"].(map[string]any)["text"].(string)
			assert.Equal(t, 3000, utf8.RuneCountInString(block))
			if tc.cut {
				assert.Equal(t, strings.Repeat("가", 2999)+"…", block)
			} else {
				assert.Equal(t, text, block)
			}
		})
	}
}

func TestNoticesCarryALinkOnlyWhenTheConnectionNamesAPage(t *testing.T) {
	cases := []struct {
		name, pattern, want string
	}{
		{"a notice page pattern gives each notice its url", "https://support.example.com/notices/{id}", "https://support.example.com/notices/%d"},
		{"without one there is no url", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hc := startHelpCenter(t)
			id := hc.add(t, simhc.NewNotice{Title: "Linked"})
			conn := map[string]any{}
			for k, v := range hc.conn {
				conn[k] = v
			}
			if tc.pattern != "" {
				conn["notice_url"] = tc.pattern
			}
			d, c := hc.call(t, "notice.list", map[string]any{"query": "Linked"})
			stepstest.HostOf(c).Connections["helpcenter"] = conn
			out, err := d.Run(context.Background(), c)
			require.NoError(t, err)
			require.Len(t, out["notices"], 1)
			n := out["notices"].([]any)[0].(map[string]any)
			if tc.want == "" {
				assert.NotContains(t, n, "url")
				return
			}
			assert.Equal(t, fmt.Sprintf(tc.want, id), n["url"])
		})
	}
}
