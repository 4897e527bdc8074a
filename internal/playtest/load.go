package playtest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	yaml "go.yaml.in/yaml/v4"

	"github.com/runbook/runbook/internal/expr"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/suggest"
	"github.com/runbook/runbook/internal/yamlnode"
)

// Suffix is how a test file's name ends.
const Suffix = ".test.yaml"

// MaxBytes is the largest test file Load reads.
const MaxBytes = 1 << 20

// DefaultSpeed is the simulated clock's speed when a case names none: 100
// simulated minutes per real second, so a 5-minute cluster task ends
// before a step's first re-read.
const DefaultSpeed = 6000

var topKeys = []string{"version", "playbook", "cases"}

var caseKeys = []string{"name", "inputs", "env", "secrets", "files", "trigger", "world", "faults", "approvals", "retry", "clock", "expect"}

// Load reads and checks a test file and the playbook it names. An invalid
// file is playbook.Diagnostics (file:line:col: path: message, every
// problem at once), the playbook's own diagnostics included; a file that
// cannot be read is an ordinary error.
func Load(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load test file: %w", err)
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("load test file %s: %w", path, err)
	}
	return Parse(path, src)
}

// Parse checks a test file's source; path names it in positions and
// locates the playbook.
func Parse(path string, src []byte) (*File, error) {
	l := newLoader(path)
	f := l.parse(src)
	if len(l.diags) > 0 {
		return nil, sortDiagnostics(path, l.diags)
	}
	return f, nil
}

func (l *loader) parse(src []byte) *File {
	if len(src) > MaxBytes {
		l.errf(nil, "", "test file is larger than %d bytes", MaxBytes)
		return nil
	}
	doc, se := yamlnode.Load(src)
	if se != nil {
		l.diags = append(l.diags, playbook.Diagnostic{Pos: Pos{File: l.file, Line: se.Line, Col: se.Col}, Message: se.Message})
		return nil
	}
	root := yamlnode.Root(doc)
	if root == nil {
		l.errf(nil, "", "empty test file")
		return nil
	}
	o := l.Strict(root, "", topKeys...)
	if o == nil {
		return nil
	}
	if n := o.Get("version"); n == nil {
		l.errf(o.Node, "", "version is required (version: 1)")
	} else if v, ok := l.IntBetween(n, "version", 0, 1<<30); ok && v != 1 {
		l.errf(n, "version", "unsupported version %d; this runbook reads version 1", v)
	}
	f := &File{Path: l.file}
	if n := o.Get("playbook"); n == nil {
		l.errf(o.Node, "", "playbook is required: the playbook file these cases test, relative to this file")
	} else if name, ok := l.Str(n, "playbook"); ok {
		f.Playbook = l.loadPlaybook(n, name)
		l.pb = f.Playbook
	}
	n := o.Get("cases")
	if n == nil {
		l.errf(o.Node, "", "cases is required: at least one case")
		return f
	}
	items := l.list(n, "cases")
	if n.Kind == yaml.SequenceNode && len(items) == 0 {
		l.errf(n, "cases", "must hold at least one case")
	}
	seen := map[string]int{}
	for i, item := range items {
		c := l.testCase(item, yamlnode.IndexPath("cases", i))
		if c == nil {
			continue
		}
		if line, dup := seen[c.Name]; dup {
			l.errf(item, yamlnode.IndexPath("cases", i)+".name", "duplicate case name %q (first at line %d)", c.Name, line)
		}
		seen[c.Name] = c.Pos.Line
		f.Cases = append(f.Cases, c)
	}
	return f
}

// loadPlaybook loads the playbook named at n; its problems become this
// file's diagnostics (they keep the playbook's own positions).
func (l *loader) loadPlaybook(n *yaml.Node, name string) *playbook.Playbook {
	path := name
	if !filepath.IsAbs(path) {
		path = filepath.Join(filepath.Dir(l.file), name)
	}
	pb, err := playbook.Load(path, playbook.LoadOptions{})
	var ds playbook.Diagnostics
	switch {
	case errors.As(err, &ds):
		l.errf(n, "playbook", "%s does not load (%d problems below)", name, len(ds))
		l.diags = append(l.diags, ds...)
		return nil
	case errors.Is(err, os.ErrNotExist):
		l.errf(n, "playbook", "no playbook %s (paths are relative to the test file)", name)
		return nil
	case err != nil:
		l.errf(n, "playbook", "%v", err)
		return nil
	}
	return pb
}

// testCase decodes one case.
func (l *loader) testCase(n *yaml.Node, path string) *Case {
	o := l.Strict(n, path, caseKeys...)
	if o == nil {
		return nil
	}
	c := &Case{Pos: l.pos(o.Node), Speed: DefaultSpeed}
	if kn := o.Get("name"); kn == nil {
		l.errf(o.Node, path, "name is required: it names the case in results and --run")
	} else if s, ok := l.Str(kn, path+".name"); ok {
		c.Name = strings.TrimSpace(s)
		if c.Name == "" {
			l.errf(kn, path+".name", "must not be empty")
		}
	}
	if v := o.Get("inputs"); v != nil {
		c.Inputs, _ = l.templates(v, path+".inputs")
		l.checkInputs(v, c.Inputs, path+".inputs")
	}
	if v := o.Get("env"); v != nil {
		c.Env, c.EnvKeys = l.templates(v, path+".env")
	}
	if v := o.Get("secrets"); v != nil {
		c.Secrets, _ = l.templates(v, path+".secrets")
	}
	if v := o.Get("files"); v != nil {
		c.Files = l.files(v, path+".files")
	}
	if v := o.Get("trigger"); v != nil {
		c.Trigger = l.trigger(v, path+".trigger")
	}
	if v := o.Get("world"); v != nil {
		l.world(v, path+".world", &c.World)
	}
	if v := o.Get("faults"); v != nil {
		c.Faults = l.faults(v, path+".faults")
	}
	if v := o.Get("approvals"); v != nil {
		c.Approvals = l.approvals(v, path+".approvals")
	}
	if v := o.Get("retry"); v != nil {
		c.Retry = l.retry(v, path+".retry")
	}
	if v := o.Get("clock"); v != nil {
		if co := l.Strict(v, path+".clock", "speed"); co != nil && co.Get("speed") != nil {
			c.Speed, _ = l.positive(co.Get("speed"), path+".clock.speed")
		}
	}
	if v := o.Get("expect"); v == nil {
		l.errf(o.Node, path, "expect is required: a case without expectations cannot fail")
	} else {
		c.Expect = l.expect(v, path+".expect")
	}
	return c
}

// templates decodes a mapping of templates, keeping the written order.
func (l *loader) templates(n *yaml.Node, path string) (map[string]expr.Value, []string) {
	pairs := l.mapping(n, path)
	out := make(map[string]expr.Value, len(pairs))
	keys := make([]string, 0, len(pairs))
	for _, p := range pairs {
		out[p.Name] = l.template(p.Val, yamlnode.KeyPath(path, p.Name))
		keys = append(keys, p.Name)
	}
	return out, keys
}

// checkInputs refuses inputs the playbook does not declare.
func (l *loader) checkInputs(n *yaml.Node, given map[string]expr.Value, path string) {
	if l.pb == nil {
		return
	}
	var names []string
	for _, in := range l.pb.Inputs {
		names = append(names, in.Name)
	}
	for _, p := range l.mapping(n, path) {
		if !contains(names, p.Name) {
			l.errf(p.Key, yamlnode.KeyPath(path, p.Name), "playbook %s has no input %q%s", l.pb.Name, p.Name, suggest.Hint(p.Name, names))
		}
	}
}

// files decodes the files written before the run: relative paths that
// stay inside the case directory.
func (l *loader) files(n *yaml.Node, path string) map[string]string {
	out := map[string]string{}
	for _, p := range l.mapping(n, path) {
		fp := yamlnode.KeyPath(path, p.Name)
		if !localPath(p.Name) {
			l.errf(p.Key, fp, "must be a relative path inside the case directory (got %q)", p.Name)
			continue
		}
		if s, ok := l.Str(p.Val, fp); ok {
			out[p.Name] = s
		}
	}
	return out
}

// localPath reports whether p is relative and stays below its base.
func localPath(p string) bool {
	return p != "" && filepath.IsLocal(filepath.FromSlash(p))
}

// sortDiagnostics orders ds by file, line and column, keeping the order
// of discovery for equal positions.
func sortDiagnostics(file string, ds playbook.Diagnostics) playbook.Diagnostics {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i].Pos, ds[j].Pos
		if (a.File == file) != (b.File == file) {
			// The test file's own problems first, then the playbook's.
			return a.File == file
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
	return ds
}
