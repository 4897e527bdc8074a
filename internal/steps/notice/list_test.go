package notice_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestListAllReadsEachPageOnce(t *testing.T) {
	cases := []struct {
		name            string
		pageSize, pages int
	}{
		{"450 notices at 200 a page", 200, 3},
		{"450 notices at 150 a page", 150, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hc := startHelpCenter(t)
			hc.svc.Reset(450)
			d, c := hc.call(t, "notice.list", map[string]any{"all": true, "page_size": tc.pageSize})
			out, err := d.Run(context.Background(), c)
			require.NoError(t, err)
			assert.Len(t, out["notices"], 450)
			assert.Equal(t, tc.pages, hc.listCalls())
		})
	}
}
