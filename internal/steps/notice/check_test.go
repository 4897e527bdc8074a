package notice_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDigestParamsThatAreFineLoadWithoutProblems(t *testing.T) {
	cases := []struct {
		name string
		with map[string]any
	}{
		{"a file target with the defaults", map[string]any{"file": "digests/notices.md"}},
		{"a url target with a custom body", map[string]any{"url": "https://hooks.example.com/x", "body_shape": "custom",
			"body": map[string]any{"msg": "{{digest}}"}}},
		{"a url target with a slack body", map[string]any{"url": "http://hooks.example.com/x", "body_shape": "slack"}},
		{"first_run since one day", map[string]any{"file": "d.md", "first_run": "since:1d"}},
		{"first_run since ten years", map[string]any{"file": "d.md", "first_run": "since:3650d"}},
		{"first_run since one second", map[string]any{"file": "d.md", "first_run": "since:1s"}},
		{"an html template", map[string]any{"file": "d.html", "format": "html", "template": "<b>{{.Title}}</b>"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Empty(t, desc(t, "notice.digest").CheckLiteral(tc.with))
		})
	}
}

func TestDigestParamsThatCannotWorkAreRefusedAtLoad(t *testing.T) {
	cases := []struct {
		name string
		with map[string]any
		want string
	}{
		{"a body shape for a file", map[string]any{"file": "d.md", "body_shape": "slack"}, "body_shape: applies to url only"},
		{"a body without body_shape custom", map[string]any{"url": "https://x.example/h", "body": map[string]any{"a": "b"}},
			"body: needs body_shape: custom"},
		{"first_run since zero days", map[string]any{"file": "d.md", "first_run": "since:0d"}, "days must be a whole number from 1 to 3650"},
		{"first_run since more than ten years", map[string]any{"file": "d.md", "first_run": "since:3651d"}, "days must be a whole number from 1 to 3650"},
		{"first_run since no time at all", map[string]any{"file": "d.md", "first_run": "since:0s"}, "is not a positive duration"},
		{"an html template that does not parse", map[string]any{"file": "d.html", "format": "html", "template": "{{if .Title}}"}, "template"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			problems := desc(t, "notice.digest").CheckLiteral(tc.with)
			var all []string
			for _, p := range problems {
				all = append(all, p.Error())
			}
			assert.Len(t, problems, 1, "%v", all)
			assert.Contains(t, joinLines(all), tc.want)
		})
	}
}
