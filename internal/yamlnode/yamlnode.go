package yamlnode

import (
	"slices"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v4"

	"github.com/runbook/runbook/internal/suggest"
)

// MaxDepth bounds how many aliases Deref follows.
const MaxDepth = 64

// Errorf records a diagnostic at node n (nil: the start of the document)
// for the value at path.
type Errorf func(n *yaml.Node, path, format string, args ...any)

// Pair is one key/value of a mapping.
type Pair struct {
	Name     string
	Key, Val *yaml.Node
}

// Object is a decoded mapping: its pairs in written order and by name.
type Object struct {
	Node  *yaml.Node
	Pairs []Pair
	byKey map[string]Pair
}

// Lookup returns the pair of key, null values included.
func (o *Object) Lookup(key string) (Pair, bool) {
	p, ok := o.byKey[key]
	return p, ok
}

// Get returns the value of key, nil when absent or null.
func (o *Object) Get(key string) *yaml.Node {
	p, ok := o.byKey[key]
	if !ok || IsNull(p.Val) {
		return nil
	}
	return Deref(p.Val)
}

// KeyNode returns the key node of key, nil when absent.
func (o *Object) KeyNode(key string) *yaml.Node {
	return o.byKey[key].Key
}

// Has reports whether key is present and not null.
func (o *Object) Has(key string) bool { return o.Get(key) != nil }

// Mapping decodes n as a mapping. It reports and returns nil when n is not
// a mapping; it reports non-scalar and duplicate keys and skips them.
func Mapping(errf Errorf, n *yaml.Node, path string) *Object {
	n = Deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		errf(n, path, "must be a mapping (got %s)", KindWord(n))
		return nil
	}
	o := &Object{Node: n, byKey: map[string]Pair{}}
	var merged []Pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		kd := Deref(k)
		if kd.Kind != yaml.ScalarNode {
			errf(k, path, "mapping keys must be strings (got %s)", KindWord(kd))
			continue
		}
		if kd.ShortTag() == "!!merge" {
			merged = append(merged, mergeSources(errf, v, path)...)
			continue
		}
		if prev, dup := o.byKey[kd.Value]; dup {
			errf(k, KeyPath(path, kd.Value), "duplicate key %q (first at line %d)", kd.Value, prev.Key.Line)
			continue
		}
		p := Pair{Name: kd.Value, Key: k, Val: v}
		o.byKey[p.Name] = p
		o.Pairs = append(o.Pairs, p)
	}
	for _, p := range merged {
		if _, ok := o.byKey[p.Name]; !ok {
			o.byKey[p.Name] = p
			o.Pairs = append(o.Pairs, p)
		}
	}
	return o
}

// mergeSources returns the pairs a `<<` value brings in: one mapping or a
// list of mappings (earlier ones win).
func mergeSources(errf Errorf, v *yaml.Node, path string) []Pair {
	v = Deref(v)
	var srcs []*yaml.Node
	switch v.Kind {
	case yaml.MappingNode:
		srcs = []*yaml.Node{v}
	case yaml.SequenceNode:
		srcs = v.Content
	default:
		errf(v, path, "<< must merge a mapping or a list of mappings (got %s)", KindWord(v))
		return nil
	}
	var out []Pair
	seen := map[string]bool{}
	for _, s := range srcs {
		o := Mapping(errf, s, path)
		if o == nil {
			continue
		}
		for _, p := range o.Pairs {
			if !seen[p.Name] {
				seen[p.Name] = true
				out = append(out, p)
			}
		}
	}
	return out
}

// Strict decodes n as a mapping whose keys must be among known. At the top
// level (path "") keys starting with "x-" are allowed: they hold anchors
// for reuse.
func Strict(errf Errorf, n *yaml.Node, path string, known ...string) *Object {
	o := Mapping(errf, n, path)
	if o == nil {
		return nil
	}
	for _, p := range o.Pairs {
		if path == "" && strings.HasPrefix(p.Name, "x-") {
			continue
		}
		if !slices.Contains(known, p.Name) {
			errf(p.Key, KeyPath(path, p.Name), "unknown key %q%s", p.Name, suggest.Hint(p.Name, known))
		}
	}
	return o
}

// Deref follows aliases, at most MaxDepth of them.
func Deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && n.Alias != nil && i < MaxDepth; i++ {
		n = n.Alias
	}
	return n
}

// IsNull reports whether n is absent or a null scalar.
func IsNull(n *yaml.Node) bool {
	n = Deref(n)
	return n == nil || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// KindWord names what a node holds, for "must be X (got Y)".
func KindWord(n *yaml.Node) string {
	n = Deref(n)
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return scalarWord(n.ShortTag())
	case yaml.AliasNode:
		return "an alias"
	}
	return "nothing"
}

func scalarWord(tag string) string {
	switch tag {
	case "!!str":
		return "string"
	case "!!int":
		return "integer"
	case "!!float":
		return "number"
	case "!!bool":
		return "boolean"
	case "!!null":
		return "null"
	}
	return strings.TrimPrefix(tag, "!!")
}

// JoinPath appends a field name to a diagnostic path.
func JoinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// KeyPath appends a map key to a diagnostic path, quoting it when it is
// not a plain name.
func KeyPath(path, key string) string {
	if plainName(key) {
		return JoinPath(path, key)
	}
	return path + "[" + strconv.Quote(key) + "]"
}

// IndexPath appends a list index to a diagnostic path.
func IndexPath(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

// plainName reports whether key needs no quoting in a path: letters,
// digits, '_' and '-' (the rule the steps package uses for Problem paths).
func plainName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r != '_' && r != '-' && (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}
