package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// progress shows a run's events as they happen.
type progress interface {
	observe(runID string, ev state.Event)
	// output shows lines the steps printed (engine.Options.Observer.Output).
	output(runID string, lines []state.OutputLine)
	// close stops the display after the run returned.
	close()
}

// isTerminal reports whether w is a terminal that understands cursor
// movement. /dev/null is a character device but no terminal: output sent
// there gets the plain lines.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	if t := os.Getenv("TERM"); t == "" || t == "dumb" {
		return false
	}
	return isTTY(f)
}

// runScope tells the events of the root run from those of its
// sub-playbook runs, whose IDs extend the root's.
type runScope struct {
	root string
}

// prefix returns "" for the root run and "step/" for a child run started
// by the root's step (IDs are "<root>.<step>").
func (s *runScope) prefix(runID string) string {
	if s.root == "" {
		s.root = runID
	}
	if runID == s.root {
		return ""
	}
	if rest, ok := strings.CutPrefix(runID, s.root+"."); ok {
		return rest + "/"
	}
	return runID + "/"
}

// plainProgress writes one line per event: for logs and pipes.
type plainProgress struct {
	mu    sync.Mutex
	w     *bufio.Writer
	scope runScope
	red   redactor
}

func newPlainProgress(w io.Writer, red redactor, root string) *plainProgress {
	return &plainProgress{w: bufio.NewWriter(w), red: red, scope: runScope{root: root}}
}

func (p *plainProgress) observe(runID string, ev state.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	prefix := p.scope.prefix(runID)
	if prefix == "" && finalRunEvent(ev.Type) {
		return // the summary says it, with the duration
	}
	line := formatEvent(ev, prefix, runID)
	if line == "" {
		return
	}
	p.w.WriteString(p.red.String(line))
	p.w.WriteByte('\n')
	p.w.Flush()
}

// output prints every line, under its step: "15:04:05   build | text".
func (p *plainProgress) output(runID string, lines []state.OutputLine) {
	p.mu.Lock()
	defer p.mu.Unlock()
	prefix := p.scope.prefix(runID)
	for _, l := range lines {
		p.w.WriteString(p.red.String(formatOutputLine(l, prefix)))
		p.w.WriteByte('\n')
	}
	p.w.Flush()
}

func (p *plainProgress) close() {
	p.mu.Lock()
	p.w.Flush()
	p.mu.Unlock()
}

func finalRunEvent(t string) bool {
	switch t {
	case "run.succeeded", "run.failed", "run.cancelled", "run.skipped", "run.waiting":
		return true
	}
	return false
}

// formatEvent renders one event as a plain line with a local time stamp.
// prefix qualifies step names of sub-playbook runs; runID names the run in
// run-level lines.
func formatEvent(ev state.Event, prefix, runID string) string {
	ts := ev.Time.Local().Format("15:04:05")
	step := prefix + ev.Step
	var s string
	switch ev.Type {
	case "step.started":
		s = fmt.Sprintf("step %s started (attempt %d)", step, max(ev.Attempt, 1))
	case "step.succeeded":
		s = fmt.Sprintf("step %s succeeded in %s", step, formatDuration(eventDuration(ev)))
	case "step.failed":
		s = fmt.Sprintf("step %s failed after %s: %s", step, formatDuration(eventDuration(ev)), ev.Message)
		if c, ok := ev.Data["code"].(string); ok && c != "" {
			s += " (" + c + ")"
		}
	case "step.skipped":
		s = fmt.Sprintf("step %s skipped: %s", step, ev.Message)
	case "step.cancelled":
		s = fmt.Sprintf("step %s cancelled", step)
	case "step.waiting":
		s = fmt.Sprintf("step %s is %s", step, waitingFor(ev))
	case "step.retry", "step.reconciled", "approval.requested":
		s = fmt.Sprintf("step %s: %s", step, ev.Message)
	case "approval.answered":
		s = fmt.Sprintf("step %s %s", step, ev.Message)
	case "log":
		s = step + ": "
		if ev.Level != "" && ev.Level != "INFO" {
			s += ev.Level + " "
		}
		s += ev.Message + formatData(ev.Data)
	case "run.created":
		s = fmt.Sprintf("run %s created", runID)
		if name, ok := strings.CutPrefix(ev.Message, "run created for playbook "); ok {
			s += " (playbook " + name + ")"
		}
		if prefix != "" {
			s = prefix + " " + s
		}
	default:
		s = ev.Message
		if s == "" {
			s = ev.Type
		}
		if ev.Step != "" {
			s = "step " + step + ": " + s
		} else if prefix != "" {
			s = strings.TrimSuffix(prefix, "/") + ": " + s
		}
	}
	return ts + " " + s
}

// eventDuration reads Data.duration_ms.
func eventDuration(ev state.Event) time.Duration {
	switch v := ev.Data["duration_ms"].(type) {
	case int64:
		return time.Duration(v) * time.Millisecond
	case int:
		return time.Duration(v) * time.Millisecond
	case float64:
		return time.Duration(v * float64(time.Millisecond))
	case json.Number:
		n, _ := v.Int64()
		return time.Duration(n) * time.Millisecond
	}
	return 0
}

// formatData renders log attributes as " k=v k2=v2", sorted by key.
func formatData(m map[string]any) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteByte(' ')
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(formatScalar(m[k]))
	}
	return b.String()
}

func formatScalar(v any) string {
	switch x := v.(type) {
	case string:
		if x == "" || strings.ContainsAny(x, " \t\n\"=") {
			return strconv.Quote(x)
		}
		return x
	case nil:
		return "null"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// formatDuration: 0.31s, 4.2s, 2m3s.
func formatDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < 10*time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + "s"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	}
	return d.Round(time.Second).String()
}

// liveProgress redraws a step list in place on a terminal: finished
// lines that no longer fit scroll up and stay; logs print above the list.
type liveProgress struct {
	mu     sync.Mutex
	w      *os.File
	buf    strings.Builder
	scope  runScope
	red    redactor
	color  bool
	header bool

	lines []*liveLine
	byID  map[string]*liveLine
	logs  []string // printed above the list on the next frame
	drawn int      // lines of the list on screen
	dirty bool

	stop chan struct{}
	done chan struct{}
}

type liveLine struct {
	id      string
	status  string // running, succeeded, failed, skipped, waiting, retry, cancelled
	attempt int
	started time.Time
	ended   time.Time
	dur     time.Duration
	note    string
	// tail holds the last lines the step printed, shown under it while it
	// runs.
	tail []string
	// for_each steps count their items.
	items, itemsDone, itemsFailed int
}

// liveTail is how many of a running step's last lines the live list shows.
const liveTail = 3

// frameInterval bounds the redraw rate (20 per second).
const frameInterval = 50 * time.Millisecond

func newLiveProgress(w *os.File, red redactor, root string) *liveProgress {
	_, noColor := os.LookupEnv("NO_COLOR")
	p := &liveProgress{
		w: w, red: red, color: !noColor, scope: runScope{root: root},
		byID: map[string]*liveLine{}, stop: make(chan struct{}), done: make(chan struct{}),
	}
	go p.loop()
	return p
}

func (p *liveProgress) loop() {
	defer close(p.done)
	t := time.NewTicker(frameInterval)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			if p.dirty || p.running() {
				p.draw(false)
			}
			p.mu.Unlock()
		}
	}
}

func (p *liveProgress) running() bool {
	for _, l := range p.lines {
		if l.status == "running" || l.status == "retry" {
			return true
		}
	}
	return false
}

func (p *liveProgress) observe(runID string, ev state.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	prefix := p.scope.prefix(runID)
	if !p.header && prefix == "" {
		p.header = true
		name := ""
		if n, ok := strings.CutPrefix(ev.Message, "run created for playbook "); ok {
			name = "  " + p.paint(dim, n)
		}
		p.logs = append(p.logs, p.paint(bold, "run "+runID)+name)
	}
	p.dirty = true
	if ev.Step == "" {
		if ev.Type == "run.queued" {
			p.logs = append(p.logs, "  "+ev.Message)
		}
		return
	}
	id := prefix + ev.Step
	parent := ""
	if i := strings.LastIndexByte(id, '['); i > 0 && strings.HasSuffix(id, "]") {
		parent = id[:i]
	}
	switch ev.Type {
	case "log":
		msg := ev.Message + formatData(ev.Data)
		if ev.Level != "" && ev.Level != "INFO" {
			msg = ev.Level + " " + msg
		}
		p.logs = append(p.logs, p.paint(dim, "  "+id+": ")+msg)
		return
	case "approval.requested", "step.reconciled", "approval.answered":
		p.logs = append(p.logs, p.paint(dim, "  "+id+": ")+ev.Message)
		return
	}
	if parent != "" {
		p.item(parent, ev)
		return
	}
	l := p.line(id, ev.Time)
	l.ended = ev.Time
	switch ev.Type {
	case "step.started":
		l.status, l.attempt, l.note = "running", max(ev.Attempt, 1), ""
		if l.started.IsZero() {
			l.started = ev.Time
		}
	case "step.retry":
		l.status, l.attempt, l.note = "retry", ev.Attempt, ev.Message
	case "step.succeeded":
		l.status, l.dur, l.note = "succeeded", eventDuration(ev), ""
	case "step.failed":
		l.status, l.dur, l.note = "failed", eventDuration(ev), ev.Message
	case "step.skipped":
		l.status, l.note = "skipped", ev.Message
	case "step.cancelled":
		l.status, l.dur = "cancelled", eventDuration(ev)
	case "step.waiting":
		l.status, l.note = "waiting", waitingFor(ev)
	}
}

// output keeps the last lines of each running step, shown under it.
func (p *liveProgress) output(runID string, lines []state.OutputLine) {
	p.mu.Lock()
	defer p.mu.Unlock()
	prefix := p.scope.prefix(runID)
	for _, ol := range lines {
		id := prefix + ol.Step
		if i := strings.LastIndexByte(id, '['); i > 0 && strings.HasSuffix(id, "]") {
			id = id[:i]
		}
		l := p.byID[id]
		if l == nil {
			continue
		}
		l.tail = append(l.tail, printable(ol.Text))
		if len(l.tail) > liveTail {
			l.tail = l.tail[len(l.tail)-liveTail:]
		}
		p.dirty = true
	}
}

// printable replaces what would move the cursor or recolour the terminal
// (escape sequences, carriage returns) in a printed line.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t':
			return ' '
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return '·'
		}
		return r
	}, s)
}

// item updates a for_each step's line from one item's event.
func (p *liveProgress) item(parent string, ev state.Event) {
	l := p.line(parent, ev.Time)
	if l.status == "" {
		l.status = "running"
	}
	switch ev.Type {
	case "step.started":
		if ev.Attempt <= 1 {
			l.items++
		}
	case "step.succeeded", "step.skipped":
		l.itemsDone++
	case "step.failed", "step.cancelled":
		l.itemsDone++
		l.itemsFailed++
		if ev.Type == "step.failed" && l.note == "" {
			l.note = ev.Message
		}
	case "step.waiting":
		l.status = "waiting"
	}
}

func (p *liveProgress) line(id string, t time.Time) *liveLine {
	l := p.byID[id]
	if l == nil {
		l = &liveLine{id: id, started: t}
		p.byID[id] = l
		p.lines = append(p.lines, l)
	}
	return l
}

func (p *liveProgress) close() {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	p.draw(true)
	p.mu.Unlock()
}

// draw rewrites the list: up over the last frame, clear, print pending
// logs, then the lines. Lines that are finished and no longer fit the
// terminal are printed once and dropped from the list. final prints
// everything.
func (p *liveProgress) draw(final bool) {
	p.dirty = false
	width, height := termSize(p.w)
	b := &p.buf
	b.Reset()
	if p.drawn > 0 {
		fmt.Fprintf(b, "\x1b[%dA", p.drawn)
	}
	b.WriteString("\r\x1b[J")
	for _, s := range p.logs {
		b.WriteString(p.red.String(s))
		b.WriteByte('\n')
	}
	p.logs = p.logs[:0]
	room := max(height-2, 3)
	for len(p.lines) > room && !final && p.lines[0].finished() {
		b.WriteString(p.render(p.lines[0], width))
		b.WriteByte('\n')
		delete(p.byID, p.lines[0].id)
		p.lines = p.lines[1:]
	}
	now := time.Now()
	p.drawn = 0
	for _, l := range p.lines {
		if !final && p.drawn >= room {
			break
		}
		b.WriteString(p.render(l, width))
		running := l.status == "running" || l.status == "retry"
		if running {
			b.WriteString(p.paint(dim, "  "+formatDuration(now.Sub(l.started))))
		}
		b.WriteByte('\n')
		p.drawn++
		if !running || final {
			l.tail = nil
			continue
		}
		for _, t := range l.tail {
			if p.drawn >= room {
				break
			}
			t = "      │ " + p.red.String(t)
			if limit := width - 2; limit > 10 {
				t = truncateRunes(t, limit)
			}
			b.WriteString(p.paint(dim, t))
			b.WriteByte('\n')
			p.drawn++
		}
	}
	if final {
		p.drawn = 0
	}
	io.WriteString(p.w, b.String())
}

func (l *liveLine) finished() bool {
	switch l.status {
	case "succeeded", "failed", "skipped", "cancelled":
		return true
	}
	return false
}

const (
	green  = "32"
	red    = "31"
	yellow = "33"
	cyan   = "36"
	dim    = "2"
	bold   = "1"
)

func (p *liveProgress) paint(code, s string) string {
	if !p.color {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

// render formats one line, without the running time, cut to width.
func (p *liveProgress) render(l *liveLine, width int) string {
	var sym, col string
	switch l.status {
	case "succeeded":
		sym, col = "✓", green
	case "failed":
		sym, col = "✗", red
	case "skipped":
		sym, col = "–", dim
	case "cancelled":
		sym, col = "✗", yellow
	case "waiting":
		sym, col = "⏸", yellow
	case "retry":
		sym, col = "↻", yellow
	default:
		sym, col = "●", cyan
	}
	text := l.id
	var extra []string
	switch {
	case l.items > 0 && l.finished():
		extra = append(extra, fmt.Sprintf("%d items", l.items))
	case l.items > 0:
		extra = append(extra, fmt.Sprintf("%d items done", l.itemsDone))
	}
	if l.finished() && l.status != "skipped" {
		dur := l.dur
		if dur == 0 && l.items > 0 && !l.started.IsZero() {
			// for_each steps: time from the first item's start
			dur = l.ended.Sub(l.started)
		}
		extra = append(extra, formatDuration(dur))
	}
	if l.status == "retry" {
		extra = append(extra, fmt.Sprintf("retry %d", l.attempt))
	} else if l.attempt > 1 && l.status != "skipped" {
		extra = append(extra, fmt.Sprintf("attempt %d", l.attempt))
	}
	if l.note != "" && l.status != "retry" {
		extra = append(extra, l.note)
	}
	plain := "  " + sym + " " + text
	if len(extra) > 0 {
		plain += "   " + strings.Join(extra, "  ")
	}
	plain = p.red.String(plain)
	// Keep room for the running time so that no line wraps (a wrapped line
	// would break the cursor arithmetic of the next frame).
	if limit := width - 12; limit > 10 {
		plain = truncateRunes(plain, limit)
	}
	if p.color {
		i := strings.Index(plain, sym)
		if i >= 0 {
			plain = plain[:i] + p.paint(col, sym) + plain[i+len(sym):]
		}
	}
	return plain
}

// envSize reads $COLUMNS and $LINES, defaulting to 80x24.
func envSize() (width, height int) {
	width, height = 80, 24
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		width = n
	}
	if n, err := strconv.Atoi(os.Getenv("LINES")); err == nil && n > 0 {
		height = n
	}
	return width, height
}

func truncateRunes(s string, n int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + "…"
	}
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
