package notice

import (
	"bytes"
	"fmt"
	htmltemplate "html/template"
	"strings"
	texttemplate "text/template"
	"time"
)

// DigestData is what a digest template receives.
//
//	{{.Title}}     the title line (param title, or "N new help-center notices")
//	{{.Notices}}   the notices shown, newest first (at most max_notices); each
//	               has .ID .Title .Category .CategoryID .Pinned .DisplayAt
//	               .UpdatedAt .Tags .IsNew .URL .Content
//	{{.Count}}     how many notices are new in all
//	{{.More}}      how many of them are not shown (Count - len(Notices))
//	{{.Since}}     the cursor's time before this digest (zero on a first
//	               run with first_run: all)
//	{{.Service}}   the help center's service ID
//	{{.Language}}  the language the notices were listed in
type DigestData struct {
	Title    string
	Notices  []Notice
	Count    int
	More     int
	Since    time.Time
	Service  string
	Language string
}

// templateFuncs are available to user templates.
var templateFuncs = map[string]any{
	"date": func(t time.Time) string { return dateOf(t) },
	"join": strings.Join,
}

// compileTemplate parses a user template for format (html uses
// html/template, which escapes what it inserts).
func compileTemplate(format, src string) (func(DigestData) (string, error), error) {
	if format == "html" {
		t, err := htmltemplate.New("digest").Funcs(templateFuncs).Option("missingkey=error").Parse(src)
		if err != nil {
			return nil, err
		}
		return func(d DigestData) (string, error) {
			var b bytes.Buffer
			err := t.Execute(&b, d)
			return b.String(), err
		}, nil
	}
	t, err := texttemplate.New("digest").Funcs(templateFuncs).Option("missingkey=error").Parse(src)
	if err != nil {
		return nil, err
	}
	return func(d DigestData) (string, error) {
		var b bytes.Buffer
		err := t.Execute(&b, d)
		return b.String(), err
	}, nil
}

// defaultTemplates are the compact lists used without a template: title,
// then one line per notice with its heading, title, date and link.
var defaultTemplates = map[string]string{
	"text": `{{.Title}}
{{range .Notices}}- {{if .Pinned}}[pinned] {{end}}[{{.Category}}] {{.Title}} ({{date .Shown}}){{if .URL}} {{.URL}}{{end}}
{{end}}{{if .More}}... and {{.More}} more
{{end}}`,
	"markdown": `**{{md .Title}}**
{{range .Notices}}- {{if .Pinned}}📌 {{end}}**{{md .Category}}** {{if .URL}}[{{md .Title}}]({{.URL}}){{else}}{{md .Title}}{{end}} · {{date .Shown}}
{{end}}{{if .More}}_… and {{.More}} more_
{{end}}`,
	"html": `<p><strong>{{.Title}}</strong></p>
<ul>
{{range .Notices}}<li>{{if .Pinned}}📌 {{end}}<strong>{{.Category}}</strong> {{if .URL}}<a href="{{.URL}}">{{.Title}}</a>{{else}}{{.Title}}{{end}} · {{date .Shown}}</li>
{{end}}</ul>
{{if .More}}<p>… and {{.More}} more</p>
{{end}}`,
}

// render renders data in format with the user's template, or the default.
func render(format, userTemplate string, data DigestData) (string, error) {
	if userTemplate != "" {
		f, err := compileTemplate(format, userTemplate)
		if err != nil {
			return "", fmt.Errorf("template: %w", err)
		}
		out, err := f(data)
		if err != nil {
			return "", fmt.Errorf("template: %w", err)
		}
		return out, nil
	}
	src := defaultTemplates[format]
	funcs := map[string]any{"md": escapeMarkdown}
	if format == "html" {
		t := htmltemplate.Must(htmltemplate.New("digest").Funcs(templateFuncs).Funcs(funcs).Parse(src))
		var b bytes.Buffer
		err := t.Execute(&b, data)
		return b.String(), err
	}
	t := texttemplate.Must(texttemplate.New("digest").Funcs(templateFuncs).Funcs(funcs).Parse(src))
	var b bytes.Buffer
	err := t.Execute(&b, data)
	return b.String(), err
}

// escapeMarkdown keeps a title from turning into markup or a link.
func escapeMarkdown(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune("\\`*_[]()#<>|~", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// dateOf formats the day of t, or "" for the zero time.
func dateOf(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format("2006-01-02")
}

// defaultTitle is the title line without a title param.
func defaultTitle(count int) string {
	if count == 1 {
		return "1 new help-center notice"
	}
	return fmt.Sprintf("%d new help-center notices", count)
}
