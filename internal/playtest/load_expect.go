package playtest

import (
	"net/http"
	"regexp"
	"strings"

	yaml "go.yaml.in/yaml/v4"

	"github.com/runbook/runbook/internal/yamlnode"
)

// Statuses an expectation may name.
var (
	runStatuses  = []string{"succeeded", "failed", "cancelled", "waiting", "skipped", "refused"}
	stepStatuses = []string{"succeeded", "failed", "skipped", "cancelled", "waiting", "not_run"}
	answers      = []string{"accepted", "duplicate", "rejected"}
)

var expectKeys = []string{"status", "error", "outputs", "steps", "runs", "deliveries", "calls", "calls_ordered", "no_calls", "files", "that"}

var runKeys = []string{"status", "error", "outputs", "steps"}

// expect decodes `expect:`.
func (l *loader) expect(n *yaml.Node, path string) Expect {
	o := l.Strict(n, path, expectKeys...)
	if o == nil {
		return Expect{}
	}
	e := Expect{Pos: l.pos(o.Node)}
	e.Run = l.runExpect(o, path)
	if v := o.Get("runs"); v != nil {
		if v.Kind == yaml.SequenceNode {
			for i, item := range v.Content {
				ip := yamlnode.IndexPath(path+".runs", i)
				if ro := l.Strict(item, ip, runKeys...); ro != nil {
					r := l.runExpect(ro, ip)
					e.Runs = append(e.Runs, &r)
				}
			}
		} else {
			e.RunCount = l.intCheck(v, path+".runs")
		}
	}
	if v := o.Get("deliveries"); v != nil {
		for i, item := range l.list(v, path+".deliveries") {
			if c := l.stringCheck(item, yamlnode.IndexPath(path+".deliveries", i), answers...); c != nil {
				e.Deliveries = append(e.Deliveries, c)
			}
		}
	}
	if v := o.Get("calls"); v != nil {
		for i, item := range l.list(v, path+".calls") {
			if c := l.callExpect(item, yamlnode.IndexPath(path+".calls", i)); c != nil {
				e.Calls = append(e.Calls, c)
			}
		}
	}
	if v := o.Get("calls_ordered"); v != nil {
		e.Ordered, _ = l.Bool(v, path+".calls_ordered")
	}
	if v := o.Get("no_calls"); v != nil {
		for i, item := range l.list(v, path+".no_calls") {
			if m := l.callMatch(item, yamlnode.IndexPath(path+".no_calls", i), false); m != nil {
				e.NoCalls = append(e.NoCalls, m)
			}
		}
	}
	if v := o.Get("files"); v != nil {
		for _, p := range l.mapping(v, path+".files") {
			if f := l.fileExpect(p, yamlnode.KeyPath(path+".files", p.Name)); f != nil {
				e.Files = append(e.Files, f)
			}
		}
	}
	if v := o.Get("that"); v != nil {
		for i, item := range l.list(v, path+".that") {
			ip := yamlnode.IndexPath(path+".that", i)
			if c := l.check(item, ip); c != nil {
				if c.Expr == nil {
					l.errf(item, ip, "must be an expression in ${{ }} that is true when the case passes")
					continue
				}
				e.That = append(e.That, c)
			}
		}
	}
	return e
}

// runExpect decodes status, error, outputs and steps of o.
func (l *loader) runExpect(o *yamlnode.Object, path string) RunExpect {
	r := RunExpect{Pos: l.pos(o.Node)}
	if v := o.Get("status"); v != nil {
		r.Status = l.stringCheck(v, path+".status", runStatuses...)
	}
	if v := o.Get("error"); v != nil {
		r.Error = l.errorExpect(v, path+".error")
	}
	if v := o.Get("outputs"); v != nil {
		r.Outputs = l.values(v, path+".outputs")
	}
	if v := o.Get("steps"); v != nil {
		for _, p := range l.mapping(v, path+".steps") {
			if s := l.stepExpect(p, yamlnode.KeyPath(path+".steps", p.Name)); s != nil {
				r.Steps = append(r.Steps, s)
			}
		}
	}
	return r
}

func (l *loader) values(n *yaml.Node, path string) []*ValueExpect {
	var out []*ValueExpect
	for _, p := range l.mapping(n, path) {
		if c := l.check(p.Val, yamlnode.KeyPath(path, p.Name)); c != nil {
			out = append(out, &ValueExpect{Name: p.Name, Want: c})
		}
	}
	return out
}

// stepExpect decodes `id: status` or `id: {status, attempts, error, outputs}`.
func (l *loader) stepExpect(p yamlnode.Pair, path string) *StepExpect {
	base, _, _ := strings.Cut(p.Name, "[")
	l.stepRef(p.Key, path, base)
	s := &StepExpect{Pos: l.pos(p.Key), ID: p.Name}
	v := yamlnode.Deref(p.Val)
	if v != nil && v.Kind == yaml.ScalarNode {
		s.Status = l.stringCheck(v, path, stepStatuses...)
		return s
	}
	o := l.Strict(v, path, "status", "attempts", "error", "outputs")
	if o == nil {
		return nil
	}
	if n := o.Get("status"); n != nil {
		s.Status = l.stringCheck(n, path+".status", stepStatuses...)
	}
	if n := o.Get("attempts"); n != nil {
		s.Attempts = l.intCheck(n, path+".attempts")
	}
	if n := o.Get("error"); n != nil {
		s.Error = l.errorExpect(n, path+".error")
	}
	if n := o.Get("outputs"); n != nil {
		s.Outputs = l.values(n, path+".outputs")
	}
	return s
}

// errorExpect decodes `error: TEXT` (a part of the message) or
// `error: {code, contains}`.
func (l *loader) errorExpect(n *yaml.Node, path string) *ErrorExpect {
	if n.Kind == yaml.ScalarNode {
		return &ErrorExpect{Contains: l.stringCheck(n, path)}
	}
	o := l.Strict(n, path, "code", "contains")
	if o == nil {
		return nil
	}
	e := &ErrorExpect{}
	if v := o.Get("code"); v != nil {
		e.Code = l.stringCheck(v, path+".code")
	}
	if v := o.Get("contains"); v != nil {
		e.Contains = l.stringCheck(v, path+".contains")
	}
	return e
}

var callKeys = []string{"service", "method", "path", "status", "body", "body_contains"}

func (l *loader) callExpect(n *yaml.Node, path string) *CallExpect {
	m := l.callMatch(n, path, true)
	if m == nil {
		return nil
	}
	c := &CallExpect{CallMatch: *m}
	if o := yamlnode.Mapping(func(*yaml.Node, string, string, ...any) {}, n, path); o != nil {
		if v := o.Get("count"); v != nil {
			c.Count = l.intCheck(v, path+".count")
		}
	}
	return c
}

// callMatch decodes a call selector; withCount allows `count`.
func (l *loader) callMatch(n *yaml.Node, path string, withCount bool) *CallMatch {
	keys := callKeys
	if withCount {
		keys = append(append([]string(nil), callKeys...), "count")
	}
	o := l.Strict(n, path, keys...)
	if o == nil {
		return nil
	}
	m := &CallMatch{Pos: l.pos(o.Node)}
	if v := o.Get("service"); v == nil {
		l.errf(o.Node, path, "service is required (%s)", strings.Join(faultServices, ", "))
	} else if s, ok := l.Str(v, path+".service"); ok {
		if !contains(faultServices, s) {
			l.errf(v, path+".service", "no service %q (have: %s)", s, strings.Join(faultServices, ", "))
		}
		m.Service = s
	}
	if v := o.Get("method"); v != nil {
		m.Method = l.method(v, path+".method")
	}
	if v := o.Get("path"); v != nil {
		if s, ok := l.Str(v, path+".path"); ok {
			m.Path, m.pathRE = s, pathPattern(s)
		}
	}
	if v := o.Get("status"); v != nil {
		m.Status, _ = l.IntBetween(v, path+".status", 100, 599)
	}
	if v := o.Get("body"); v != nil {
		if b, ok := l.Value(v, path+".body"); ok {
			bm, isMap := b.(map[string]any)
			if !isMap {
				l.errf(v, path+".body", "must be a mapping of the fields the JSON body holds (got %s)", yamlnode.KindWord(v))
			}
			m.Body = bm
		}
	}
	if v := o.Get("body_contains"); v != nil {
		m.BodyContains, _ = l.Str(v, path+".body_contains")
	}
	return m
}

// pathPattern compiles a call path: segments match literally, `*` one
// segment, a final `**` any rest; a trailing slash is ignored.
func pathPattern(p string) *regexp.Regexp {
	segs := strings.Split(strings.Trim(p, "/"), "/")
	var b strings.Builder
	b.WriteString("^")
	for i, s := range segs {
		switch {
		case s == "**" && i == len(segs)-1:
			b.WriteString("(/.*)?")
			continue
		case s == "*":
			b.WriteString("/[^/]+")
		default:
			b.WriteString("/" + regexp.QuoteMeta(s))
		}
	}
	b.WriteString("/?$")
	return regexp.MustCompile(b.String())
}

var fileKeys = []string{"exists", "contains", "not_contains", "equals", "mode", "lines"}

func (l *loader) fileExpect(p yamlnode.Pair, path string) *FileExpect {
	f := &FileExpect{Pos: l.pos(p.Key)}
	f.Path = l.template(p.Key, path)
	if !strings.Contains(p.Name, "${{") && !localPath(p.Name) {
		l.errf(p.Key, path, "must be a path relative to the case directory, or an expression (got %q)", p.Name)
	}
	o := l.Strict(p.Val, path, fileKeys...)
	if o == nil {
		return nil
	}
	if v := o.Get("exists"); v != nil {
		f.Exists = l.check(v, path+".exists")
	}
	f.Contains = l.strings(o.Get("contains"), path+".contains")
	f.NotContains = l.strings(o.Get("not_contains"), path+".not_contains")
	if v := o.Get("equals"); v != nil {
		f.Equals = l.stringCheck(v, path+".equals")
	}
	if v := o.Get("mode"); v != nil {
		f.Mode = l.stringCheck(v, path+".mode")
		if f.Mode != nil && f.Mode.Expr == nil && !regexp.MustCompile(`^0?[0-7]{3}$`).MatchString(f.Mode.Literal.(string)) {
			l.errf(v, path+".mode", "must be an octal mode like \"0600\" (got %q)", f.Mode.Literal)
		}
	}
	if v := o.Get("lines"); v != nil {
		f.Lines = map[string]*Check{}
		for _, lp := range l.mapping(v, path+".lines") {
			if c := l.intCheck(lp.Val, yamlnode.KeyPath(path+".lines", lp.Name)); c != nil {
				f.Lines[lp.Name] = c
				f.LineKeys = append(f.LineKeys, lp.Name)
			}
		}
	}
	if f.Exists == nil && len(f.Contains)+len(f.NotContains)+len(f.Lines) == 0 && f.Equals == nil && f.Mode == nil {
		l.errf(p.Val, path, "give at least one of %s", strings.Join(fileKeys, ", "))
	}
	return f
}

// strings decodes one string check or a list of them.
func (l *loader) strings(n *yaml.Node, path string) []*Check {
	if n == nil {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		if c := l.stringCheck(n, path); c != nil {
			return []*Check{c}
		}
		return nil
	}
	var out []*Check
	for i, e := range n.Content {
		if c := l.stringCheck(e, yamlnode.IndexPath(path, i)); c != nil {
			out = append(out, c)
		}
	}
	return out
}

// httpMethods are the methods a call selector or a fault may name.
var httpMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// method decodes an HTTP method (any case).
func (l *loader) method(n *yaml.Node, path string) string {
	s, ok := l.Str(n, path)
	if !ok {
		return ""
	}
	m := strings.ToUpper(s)
	if !contains(httpMethods, m) {
		l.errf(n, path, "must be one of %s (got %q)", strings.Join(httpMethods, ", "), s)
	}
	return m
}
