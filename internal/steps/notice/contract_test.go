package notice_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/steps"
	_ "github.com/runbook/runbook/internal/steps/notice"
)

func desc(t *testing.T, name string) *steps.Descriptor {
	t.Helper()
	d, ok := steps.Lookup(name)
	require.True(t, ok, "step type %s is registered", name)
	return d
}

// TestEveryNoticeStepHasAnExample checks that every registered notice.*
// type carries an example. (The contract suite runs over every registered
// type, with its example, in internal/steps/all.)
func TestEveryNoticeStepHasAnExample(t *testing.T) {
	var names []string
	for _, n := range steps.Names() {
		if len(n) > 7 && n[:7] == "notice." {
			names = append(names, n)
		}
	}
	require.NotEmpty(t, names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			require.NotNil(t, desc(t, name).Example, "every notice step type has an example")
		})
	}
}

func TestLoadTimeChecksExplainWhatIsWrong(t *testing.T) {
	cases := []struct {
		name, step string
		with       map[string]any
		want       string
	}{
		{"an attachment name that climbs out is refused", "notice.attachment",
			map[string]any{"notice_id": 1, "attachment": "x", "name": "../../etc/passwd"}, `refusing file name "../../etc/passwd": it leaves the directory`},
		{"an attachment dir outside the playbook directory is refused", "notice.attachment",
			map[string]any{"notice_id": 1, "attachment": "x", "dir": "../up"}, "dir: must be a relative path inside the playbook directory"},
		{"max_bytes above 1 GiB is refused", "notice.attachment",
			map[string]any{"notice_id": 1, "attachment": "x", "max_bytes": 2 << 30}, "max_bytes"},
		{"a sort key outside the spec's fields is refused", "notice.list",
			map[string]any{"sort": []any{"title:asc"}}, "sort[0]"},
		{"a sort key without direction is refused", "notice.list",
			map[string]any{"sort": []any{"updatedDt"}}, "sort[0]"},
		{"sorting twice on a field is refused", "notice.list",
			map[string]any{"sort": []any{"updatedDt:asc", "updatedDt:desc"}}, "updatedDt is sorted on twice"},
		{"page_size above 200 is refused", "notice.list",
			map[string]any{"page_size": 201}, "page_size"},
		{"a digest needs a target", "notice.digest",
			map[string]any{}, "a target is required"},
		{"a digest has one target", "notice.digest",
			map[string]any{"url": "https://x.example/h", "file": "d.md"}, "either url or file"},
		{"a digest file stays in the playbook directory", "notice.digest",
			map[string]any{"file": "../d.md"}, "file: must be a relative path"},
		{"custom needs a body", "notice.digest",
			map[string]any{"url": "https://x.example/h", "body_shape": "custom"}, "body: is required"},
		{"first_run is all, none or since", "notice.digest",
			map[string]any{"url": "https://x.example/h", "first_run": "yesterday"}, "first_run"},
		{"a broken template is refused at load time", "notice.digest",
			map[string]any{"url": "https://x.example/h", "template": "{{range .Notices}}"}, "template"},
		{"only http URLs are posted to", "notice.digest",
			map[string]any{"url": "ftp://x.example/h"}, "http or https"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			problems := desc(t, tc.step).CheckLiteral(tc.with)
			require.NotEmpty(t, problems)
			var all []string
			for _, p := range problems {
				all = append(all, p.Error())
			}
			assert.Contains(t, joinLines(all), tc.want)
		})
	}
}

func joinLines(s []string) string {
	out := ""
	for _, l := range s {
		out += l + "\n"
	}
	return out
}
