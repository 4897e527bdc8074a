package ui

import (
	"context"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"

	"github.com/runbook/runbook/internal/api"
)

// maxRunOutput is the most lines of step output a run page reads (runbook
// runs logs RUN STEP prints all of them).
const maxRunOutput = 10000

// printedLine is a line a step printed, as the run page shows it under
// the step (escaped by the template).
type printedLine struct {
	Stream, Text, Clock string
}

// loadOutput reads what the run's steps printed, by step ID.
func (u *UI) loadOutput(ctx context.Context, s *session, esc string, d *runData) error {
	var page api.OutputPage
	if err := u.get(ctx, s, fmt.Sprintf("/api/v1/runs/%s/output?limit=%d", esc, maxRunOutput), &page); err != nil {
		return err
	}
	d.OutputTruncated = len(page.Lines) == maxRunOutput
	if n := len(page.Lines); n > 0 {
		d.OutputAfter = page.Lines[n-1].Seq
	}
	d.printed = map[string][]printedLine{}
	for _, l := range page.Lines {
		if d.Query != "" && !d.matches(l.Text) {
			continue
		}
		d.printed[l.Step] = append(d.printed[l.Step], printedLine{Stream: l.Stream, Text: l.Text, Clock: l.Time.UTC().Format("15:04:05.000")})
		d.Matches++
	}
	return nil
}

// matches reports whether a line holds the page's search (?q=, any case).
func (d *runData) matches(text string) bool {
	return strings.Contains(strings.ToLower(text), d.lowerQuery)
}

// downloadPage is how many lines a download reads from the API at once.
const downloadPage = 10000

// unsafeName are the characters a download's file name does not keep.
var unsafeName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^A-Za-z0-9._-]+`) })

// downloadOutput sends everything a step printed, as text, one line as
// printed per line (masked as the API masks it), read from the API a page
// at a time as the session: the run page's permission applies.
func (u *UI) downloadOutput(w http.ResponseWriter, r *http.Request, s *session) {
	id, step := r.PathValue("id"), r.PathValue("step")
	path := "/api/v1/runs/" + url.PathEscape(id) + "/output?step=" + url.QueryEscape(step) + "&limit=" + fmt.Sprint(downloadPage)
	var after uint64
	for first := true; ; first = false {
		var page api.OutputPage
		if err := u.get(r.Context(), s, fmt.Sprintf("%s&after=%d", path, after), &page); err != nil {
			if first {
				u.fail(w, r, s, err)
			} else {
				u.log.Warn("ui download: the output could not be read to its end", "run_id", id, "step", step, "err", err)
			}
			return
		}
		if first {
			name := unsafeName().ReplaceAllString(id+"-"+step, "_") + ".log"
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
			w.Header().Set("X-Content-Type-Options", "nosniff")
		}
		var b strings.Builder
		for _, l := range page.Lines {
			b.WriteString(l.Text)
			b.WriteByte('\n')
		}
		if _, err := w.Write([]byte(b.String())); err != nil {
			return
		}
		if len(page.Lines) < downloadPage {
			return
		}
		after = page.Lines[len(page.Lines)-1].Seq
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
}
