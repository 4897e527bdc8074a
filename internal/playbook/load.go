package playbook

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/yamlnode"
	yaml "go.yaml.in/yaml/v4"
)

// LoadOptions tunes Load and Parse.
type LoadOptions struct {
	// MaxBytes caps the source size (0: DefaultMaxBytes).
	MaxBytes int
}

func (o LoadOptions) maxBytes() int {
	if o.MaxBytes <= 0 {
		return DefaultMaxBytes
	}
	return o.MaxBytes
}

var (
	identRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`) })
)

var topKeys = []string{
	"version", "name", "description", "labels", "inputs", "env", "connections", "triggers",
	"concurrency", "timeout", "max_parallel", "take_over", "runs_on", "on_agent_lost", "secrets", "steps", "on_failure", "finally", "outputs",
}

// Load reads and parses the playbook at path. Positions name the file as
// path was given. A file that cannot be read is an ordinary error; an
// invalid playbook is Diagnostics.
func Load(path string, opts LoadOptions) (*Playbook, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load playbook: %w", err)
	}
	defer f.Close()
	limit := opts.maxBytes()
	src, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("load playbook %s: %w", path, err)
	}
	return Parse(path, src, opts)
}

// Parse parses and validates a playbook. name is the file name used in
// positions; Path is set to name and Dir to its absolute directory.
// Every problem found is returned together as Diagnostics, sorted by
// position (after a YAML syntax error there is only that one).
func Parse(name string, src []byte, opts LoadOptions) (*Playbook, error) {
	l := newLoader(name, src)
	pb := l.parse(opts)
	if len(l.diags) > 0 {
		ds := sortDiagnostics(l.diags)
		if len(ds) >= MaxDiagnostics {
			ds = append(Diagnostics{{Pos: l.pos(nil), Message: fmt.Sprintf("too many problems; stopped after %d", MaxDiagnostics)}}, ds[:MaxDiagnostics]...)
		}
		return nil, ds
	}
	pb.Path = name
	if name != "" {
		if abs, err := filepath.Abs(filepath.Dir(name)); err == nil {
			pb.Dir = abs
		} else {
			pb.Dir = filepath.Dir(name)
		}
	}
	pb.Source = src
	sum := sha256.Sum256(src)
	pb.Hash = hex.EncodeToString(sum[:])
	return pb, nil
}

// parse runs every stage; it returns nil when a stage cannot go on.
func (l *loader) parse(opts LoadOptions) *Playbook {
	if limit := opts.maxBytes(); len(l.src) > limit {
		l.errAt(l.pos(nil), "", "playbook is larger than %d bytes", limit)
		return nil
	}
	if strings.TrimSpace(string(l.src)) == "" {
		l.errAt(l.pos(nil), "", "empty playbook")
		return nil
	}
	l.lines = strings.Split(string(l.src), "\n")
	doc := l.parseYAML()
	if doc == nil || !l.measure(doc) {
		return nil
	}
	root := doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			l.errAt(l.pos(nil), "", "empty playbook")
			return nil
		}
		root = root.Content[0]
	}
	o := yamlnode.Strict(l.errf, root, "", topKeys...)
	if o == nil {
		return nil
	}
	pb := &Playbook{Pos: l.pos(yamlnode.Deref(root))}
	l.header(pb, o)
	inputs := l.inputs(pb, o)
	l.secretSources(pb, o)
	ss := l.stepLists(pb, o)
	l.triggers(pb, o, inputs)
	l.concurrency(pb, o, inputs)
	l.env(pb, o, inputs)
	l.connections(pb, o, inputs)
	if ss != nil {
		l.resolve(ss)
		l.compileSteps(pb, ss, inputs)
		l.playbookOutputs(pb, o, ss, inputs)
	}
	pb.Secrets = l.secretList()
	return pb
}

// header decodes version, name, description, timeout, max_parallel and
// take_over.
func (l *loader) header(pb *Playbook, o *yamlnode.Object) {
	if n := o.Get("version"); n == nil {
		l.errf(o.Node, "", "version is required (version: 1)")
	} else if v, ok := l.Int(n, "version"); ok {
		if v != 1 {
			l.errf(n, "version", "unsupported version %d; this runbook reads version 1", v)
		}
		pb.Version = v
	}
	if n := o.Get("name"); n == nil {
		l.errf(o.Node, "", "name is required")
	} else if s, ok := l.Str(n, "name"); ok {
		if !validName(s) {
			l.errf(n, "name", "invalid name %q: use 1-63 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit", s)
		}
		pb.Name = s
	}
	if n := o.Get("description"); n != nil {
		pb.Description, _ = l.Str(n, "description")
	}
	l.labels(pb, o)
	if n := o.Get("timeout"); n != nil {
		pb.Timeout = l.positiveDuration(n, "timeout")
	}
	if n := o.Get("max_parallel"); n != nil {
		pb.MaxParallel = l.atLeastOne(n, "max_parallel")
	}
	if n := o.Get("take_over"); n != nil {
		pb.TakeOver, _ = l.Bool(n, "take_over")
	}
	if pb.RunsOn = l.runsOn(o, ""); pb.RunsOn != nil && pb.RunsOn.Labels == nil {
		l.errf(o.KeyNode("on_agent_lost"), "on_agent_lost", "on_agent_lost applies with runs_on (the labels of the agents the steps run on)")
		pb.RunsOn = nil
	}
}

// positiveDuration decodes a duration that must be above zero.
func (l *loader) positiveDuration(n *yaml.Node, path string) time.Duration {
	d, ok := l.Duration(n, path, durationExamples)
	if ok && d <= 0 {
		l.errf(n, path, "must be longer than 0s")
	}
	return d
}

// atLeastOne decodes an integer >= 1.
func (l *loader) atLeastOne(n *yaml.Node, path string) int {
	v, ok := l.Int(n, path)
	if ok && v < 1 {
		l.errf(n, path, "must be at least 1 (got %d)", v)
		return 0
	}
	return v
}
