package playtest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/runbook/runbook/internal/expr"
	"github.com/runbook/runbook/internal/sim"
)

// maxListed bounds the calls a failure message lists.
const maxListed = 12

// calls checks the calls expected, their order and the calls that must
// not have happened.
func (k *checker) calls(e Expect, calls []sim.Call) {
	prev, prevAt := (*CallExpect)(nil), 0
	for i, ce := range e.Calls {
		path := fmt.Sprintf("calls[%d]", i)
		hits := matching(&ce.CallMatch, calls)
		switch {
		case ce.Count == nil && len(hits) == 0:
			k.fail(ce.Pos, path, "expected a call %s, got none; %s", ce.describe(), listCalls(calls, ce.Service))
			continue
		case ce.Count != nil:
			if !k.compare(ce.Count, path+".count", len(hits), k.scope(nil, nil)) {
				k.out[len(k.out)-1].Message += fmt.Sprintf(" calls %s; %s", ce.describe(), listCalls(calls, ce.Service))
			}
		}
		if !e.Ordered || len(hits) == 0 {
			continue
		}
		// In order: the first matching call after the previous one's.
		at := slices.IndexFunc(hits, func(c sim.Call) bool { return c.Seq > prevAt })
		if at < 0 {
			k.fail(ce.Pos, path, "expected %s after %s (call #%d), but it came only before: %s",
				ce.describe(), prev.describe(), prevAt, listSeqs(hits))
			continue
		}
		prev, prevAt = ce, hits[at].Seq
	}
	for i, m := range e.NoCalls {
		if hits := matching(m, calls); len(hits) > 0 {
			k.fail(m.Pos, fmt.Sprintf("no_calls[%d]", i), "expected no call %s, got %d: %s", m.describe(), len(hits), listCalls(hits, ""))
		}
	}
}

// matching returns the calls m selects.
func matching(m *CallMatch, calls []sim.Call) []sim.Call {
	var out []sim.Call
	for _, c := range calls {
		if m.matches(c) {
			out = append(out, c)
		}
	}
	return out
}

func (m *CallMatch) matches(c sim.Call) bool {
	if c.Service != m.Service || (m.Method != "" && c.Method != m.Method) || (m.Status != 0 && c.Status != m.Status) {
		return false
	}
	if m.pathRE != nil && !m.pathRE.MatchString(c.Path) {
		return false
	}
	if m.BodyContains != "" && !strings.Contains(c.Body, m.BodyContains) {
		return false
	}
	if m.Body != nil {
		var body any
		if json.Unmarshal([]byte(c.Body), &body) != nil || !subset(m.Body, body) {
			return false
		}
	}
	return true
}

// subset reports whether every field of want is in got with an equal
// value; nested mappings are subsets too, lists are compared whole.
func subset(want map[string]any, got any) bool {
	g, ok := got.(map[string]any)
	if !ok {
		return false
	}
	for k, w := range want {
		gv, ok := g[k]
		if !ok {
			return false
		}
		if wm, isMap := w.(map[string]any); isMap {
			if !subset(wm, gv) {
				return false
			}
			continue
		}
		if !equal(w, gv) {
			return false
		}
	}
	return true
}

// describe names what m selects, e.g. "POST nks /v1/clusters/*/upgrade".
func (m *CallMatch) describe() string {
	if m == nil {
		return "the start"
	}
	parts := []string{}
	if m.Method != "" {
		parts = append(parts, m.Method)
	}
	parts = append(parts, m.Service)
	if m.Path != "" {
		parts = append(parts, m.Path)
	}
	if m.Status != 0 {
		parts = append(parts, fmt.Sprintf("answered %d", m.Status))
	}
	if m.Body != nil {
		parts = append(parts, "with body "+show(m.Body))
	}
	if m.BodyContains != "" {
		parts = append(parts, fmt.Sprintf("with a body containing %q", m.BodyContains))
	}
	return strings.Join(parts, " ")
}

// listCalls lists the calls to service ("" every service) for a message.
func listCalls(calls []sim.Call, service string) string {
	var lines []string
	for _, c := range calls {
		if service != "" && c.Service != service {
			continue
		}
		line := fmt.Sprintf("#%d %s %s %s %d", c.Seq, c.Method, c.Service, c.Path, c.Status)
		if c.Fault != "" {
			line += " (" + c.Fault + ")"
		}
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		if service == "" {
			return "no calls at all"
		}
		return "no calls to " + service
	}
	more := ""
	if len(lines) > maxListed {
		more = fmt.Sprintf(", and %d more", len(lines)-maxListed)
		lines = lines[:maxListed]
	}
	return "calls: " + strings.Join(lines, ", ") + more
}

func listSeqs(calls []sim.Call) string {
	seqs := make([]string, len(calls))
	for i, c := range calls {
		seqs[i] = fmt.Sprintf("#%d", c.Seq)
	}
	return strings.Join(seqs, ", ")
}

// files checks the files expected after the run.
func (k *checker) files(fs []*FileExpect) {
	scope := &expr.Scope{Env: k.cr.env}
	for _, f := range fs {
		name, err := evalString(f.Path, scope)
		if err != nil {
			k.fail(f.Pos, "files", "%v", err)
			continue
		}
		path := "files[" + fmt.Sprintf("%q", name) + "]"
		full := name
		if !filepath.IsAbs(full) {
			full = filepath.Join(k.cr.dir, filepath.FromSlash(name))
		}
		info, statErr := os.Stat(full)
		exists := statErr == nil
		if f.Exists != nil && !k.compare(f.Exists, path+".exists", exists, scope) {
			continue
		}
		if !exists {
			if f.Exists == nil {
				k.fail(f.Pos, path, "expected the file to exist: %v", statErr)
			}
			continue
		}
		content, err := os.ReadFile(full)
		if err != nil {
			k.fail(f.Pos, path, "%v", err)
			continue
		}
		k.content(f, path, string(content), fmt.Sprintf("%04o", info.Mode().Perm()), scope)
	}
}

func (k *checker) content(f *FileExpect, path, text, mode string, scope *expr.Scope) {
	for _, c := range f.Contains {
		if w, err := k.want(c, scope); err != nil {
			k.fail(c.Pos, path+".contains", "%v", err)
		} else if s := fmt.Sprint(w); !strings.Contains(text, s) {
			k.fail(c.Pos, path+".contains", "expected the file to contain %q; it holds %s", s, show(text))
		}
	}
	for _, c := range f.NotContains {
		if w, err := k.want(c, scope); err != nil {
			k.fail(c.Pos, path+".not_contains", "%v", err)
		} else if s := fmt.Sprint(w); strings.Contains(text, s) {
			k.fail(c.Pos, path+".not_contains", "expected the file not to contain %q; it holds %s", s, show(text))
		}
	}
	if f.Equals != nil {
		k.compare(f.Equals, path+".equals", text, scope)
	}
	if f.Mode != nil {
		want, err := k.want(f.Mode, scope)
		if err == nil {
			if s := fmt.Sprint(want); strings.TrimLeft(s, "0") != strings.TrimLeft(mode, "0") {
				k.fail(f.Mode.Pos, path+".mode", "expected mode %s, got %s", s, mode)
			}
		} else {
			k.fail(f.Mode.Pos, path+".mode", "%v", err)
		}
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	for _, key := range f.LineKeys {
		n := 0
		for _, line := range lines {
			if line == key {
				n++
			}
		}
		k.compare(f.Lines[key], path+".lines["+fmt.Sprintf("%q", key)+"]", n, scope)
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for key := range m {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	return keys
}
