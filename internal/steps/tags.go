package steps

// Tags: a step's `with` map is described by a plain Go struct whose tags
// carry the constraints. fieldsOf reads the tags once, when the type is
// first decoded or described (Descriptor.paramFields); Decode
// (run time), CheckLiteral (load time) and ParamsSchema (the JSON Schema)
// all work from the same parsed fields, so the three never disagree.
//
//	json:"name"        the key in `with` (required on every exported field)
//	required:"true"    must be present and not null; a required string must not be empty
//	min:"1" max:"10"   numbers (and Durations, as "30s"); on lists/maps of numbers, each element
//	minlen, maxlen     strings: characters (runes); lists and maps: element count
//	enum:"GET,POST"    strings or integers (each element of a list)
//	pattern:"^v\d+$"   Go regexp, strings (each element of a list)
//	like:"v1"          with pattern: an example that matches it; a value that does
//	                   not is told "must be of the form v1", not the pattern
//	format:"uri"       duration, cidr, ip, uri, semver
//	default:"30s"      applied when the key is absent; lists of scalars as "a,b" or JSON
//	desc:"..."         description in the schema
//
// A tag that does not fit its field (min on a string, a pattern that does
// not compile, a default that breaks the field's own rules) panics then,
// naming the type. A limit that a tag can state belongs in the tag, not in Check:
// the tag reaches the schema an editor reads as well as both checks.

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// kind is the shape of a params value.
type kind uint8

const (
	kString kind = iota + 1
	kBool
	kInt
	kFloat
	kDuration
	kSlice
	kMap
	kStruct
	kAny
	kPtr
)

// shape describes a Go type the decoder supports.
type shape struct {
	kind   kind
	t      reflect.Type
	elem   *shape  // kSlice, kMap, kPtr
	fields []field // kStruct
}

// rules are the per-field constraints. For a list or map the length rules
// apply to the collection and leaf (the scalar rules) to each element.
type rules struct {
	min, max       *float64 // numbers; Durations in nanoseconds
	minLen, maxLen int      // -1 when unset
	enum           []string
	pattern        *regexp.Regexp
	like           string // an example the pattern matches, for messages
	format         string
	leaf           *rules // scalar rules only, for elements
}

// field is one parsed struct field.
type field struct {
	name     string
	index    []int
	shape    *shape
	required bool
	rules    rules
	hasDef   bool
	def      any // JSON-like default value, decoded into the field when absent
	desc     string
}

var (
	durationType = reflect.TypeFor[Duration]()
	knownFormats = map[string]bool{"duration": true, "cidr": true, "ip": true, "uri": true, "semver": true}
	semverRe     = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	})
)

func fieldsOf(t reflect.Type) ([]field, error) {
	s, err := shapeOf(t, map[reflect.Type]bool{})
	if err != nil {
		return nil, err
	}
	return s.fields, nil
}

func shapeOf(t reflect.Type, seen map[reflect.Type]bool) (*shape, error) {
	if t == durationType {
		return &shape{kind: kDuration, t: t}, nil
	}
	switch t.Kind() {
	case reflect.String:
		return &shape{kind: kString, t: t}, nil
	case reflect.Bool:
		return &shape{kind: kBool, t: t}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return &shape{kind: kInt, t: t}, nil
	case reflect.Float32, reflect.Float64:
		return &shape{kind: kFloat, t: t}, nil
	case reflect.Interface:
		if t.NumMethod() != 0 {
			return nil, fmt.Errorf("unsupported type %s (only any)", t)
		}
		return &shape{kind: kAny, t: t}, nil
	case reflect.Slice, reflect.Map, reflect.Pointer:
		if t.Kind() == reflect.Map && t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("unsupported type %s (map keys must be strings)", t)
		}
		if t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Pointer {
			return nil, fmt.Errorf("unsupported type %s", t)
		}
		e, err := shapeOf(t.Elem(), seen)
		if err != nil {
			return nil, err
		}
		k := map[reflect.Kind]kind{reflect.Slice: kSlice, reflect.Map: kMap, reflect.Pointer: kPtr}[t.Kind()]
		return &shape{kind: k, t: t, elem: e}, nil
	case reflect.Struct:
		if seen[t] {
			return nil, fmt.Errorf("recursive type %s", t)
		}
		seen[t] = true
		defer delete(seen, t)
		fs, err := structFields(t, nil, seen)
		if err != nil {
			return nil, err
		}
		return &shape{kind: kStruct, t: t, fields: fs}, nil
	}
	return nil, fmt.Errorf("unsupported type %s", t)
}

func structFields(t reflect.Type, prefix []int, seen map[reflect.Type]bool) ([]field, error) {
	var out []field
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		index := append(append([]int(nil), prefix...), i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if sf.Anonymous && name == "" && sf.Type.Kind() == reflect.Struct {
			sub, err := structFields(sf.Type, index, seen)
			if err != nil {
				return nil, err
			}
			out = append(out, sub...)
			continue
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			return nil, fmt.Errorf("field %s.%s has no json name", t, sf.Name)
		}
		f, err := parseField(sf, name, index, seen)
		if err != nil {
			return nil, fmt.Errorf("field %s.%s: %w", t, sf.Name, err)
		}
		out = append(out, f)
	}
	names := map[string]bool{}
	for _, f := range out {
		if names[f.name] {
			return nil, fmt.Errorf("%s: duplicate json name %q", t, f.name)
		}
		names[f.name] = true
	}
	return out, nil
}

// unptr returns the shape below any pointer.
func unptr(s *shape) *shape {
	if s.kind == kPtr {
		return s.elem
	}
	return s
}

// leafOf returns the scalar shape the scalar rules apply to: the field
// itself, or the element of a list or map.
func leafOf(s *shape) *shape {
	s = unptr(s)
	if s.kind == kSlice || s.kind == kMap {
		return unptr(s.elem)
	}
	return s
}

func parseField(sf reflect.StructField, name string, index []int, seen map[reflect.Type]bool) (field, error) {
	s, err := shapeOf(sf.Type, seen)
	if err != nil {
		return field{}, err
	}
	f := field{name: name, index: index, shape: s, desc: sf.Tag.Get("desc")}
	if v, ok := sf.Tag.Lookup("required"); ok {
		if f.required, err = strconv.ParseBool(v); err != nil {
			return f, fmt.Errorf("required tag %q: %w", v, err)
		}
	}
	if f.rules, err = parseRules(sf.Tag, s); err != nil {
		return f, err
	}
	if v, ok := sf.Tag.Lookup("default"); ok {
		if f.def, err = parseDefault(name, s, &f.rules, v); err != nil {
			return f, err
		}
		f.hasDef = true
	}
	return f, nil
}

// parseRules reads the constraint tags of a field of shape s, in the order
// the tags are documented.
func parseRules(tag reflect.StructTag, s *shape) (rules, error) {
	r := rules{minLen: -1, maxLen: -1}
	leaf, base := leafOf(s), unptr(s)
	var err error
	if r.min, err = parseBound(tag, "min", leaf); err != nil {
		return r, err
	}
	if r.max, err = parseBound(tag, "max", leaf); err != nil {
		return r, err
	}
	if r.minLen, err = parseLength(tag, "minlen", base); err != nil {
		return r, err
	}
	if r.maxLen, err = parseLength(tag, "maxlen", base); err != nil {
		return r, err
	}
	if r.enum, err = parseEnum(tag, leaf); err != nil {
		return r, err
	}
	if r.pattern, err = parsePattern(tag, leaf); err != nil {
		return r, err
	}
	if r.like, err = parseLike(tag, r.pattern); err != nil {
		return r, err
	}
	if r.format, err = parseFormat(tag, leaf); err != nil {
		return r, err
	}
	r.leaf = &rules{min: r.min, max: r.max, minLen: -1, maxLen: -1,
		enum: r.enum, pattern: r.pattern, like: r.like, format: r.format}
	return r, nil
}

// parseBound reads a min or max tag: a number, or a duration ("30s") for a
// Duration. It is nil when the tag is absent.
func parseBound(tag reflect.StructTag, name string, leaf *shape) (*float64, error) {
	v, ok := tag.Lookup(name)
	if !ok {
		return nil, nil
	}
	var n float64
	switch leaf.kind {
	case kInt, kFloat:
		var err error
		if n, err = strconv.ParseFloat(v, 64); err != nil {
			return nil, fmt.Errorf("%s tag %q is not a number", name, v)
		}
	case kDuration:
		d, err := time.ParseDuration(v)
		if err != nil {
			return nil, fmt.Errorf("%s tag %q is not a duration", name, v)
		}
		n = float64(d)
	default:
		return nil, fmt.Errorf("%s applies to numbers and durations; use minlen/maxlen for lengths", name)
	}
	return &n, nil
}

// parseLength reads a minlen or maxlen tag; -1 when it is absent.
func parseLength(tag reflect.StructTag, name string, base *shape) (int, error) {
	v, ok := tag.Lookup(name)
	if !ok {
		return -1, nil
	}
	if base.kind != kString && base.kind != kSlice && base.kind != kMap {
		return -1, fmt.Errorf("%s applies to strings, lists and maps", name)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return -1, fmt.Errorf("%s tag %q is not a non-negative integer", name, v)
	}
	return n, nil
}

// parseEnum reads the comma-separated choices of an enum tag.
func parseEnum(tag reflect.StructTag, leaf *shape) ([]string, error) {
	v, ok := tag.Lookup("enum")
	if !ok {
		return nil, nil
	}
	if leaf.kind != kString && leaf.kind != kInt {
		return nil, fmt.Errorf("enum applies to strings and integers")
	}
	var out []string
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		if leaf.kind == kInt {
			if _, err := strconv.ParseInt(e, 10, 64); err != nil {
				return nil, fmt.Errorf("enum value %q is not an integer", e)
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// parsePattern compiles a pattern tag.
func parsePattern(tag reflect.StructTag, leaf *shape) (*regexp.Regexp, error) {
	v, ok := tag.Lookup("pattern")
	if !ok {
		return nil, nil
	}
	if leaf.kind != kString {
		return nil, fmt.Errorf("pattern applies to strings")
	}
	re, err := regexp.Compile(v)
	if err != nil {
		return nil, fmt.Errorf("pattern: %w", err)
	}
	return re, nil
}

// parseLike reads a like tag: an example value of a pattern, which the
// message of a value that does not match shows instead of the pattern.
func parseLike(tag reflect.StructTag, pattern *regexp.Regexp) (string, error) {
	v, ok := tag.Lookup("like")
	if !ok {
		return "", nil
	}
	if pattern == nil {
		return "", fmt.Errorf("like applies with a pattern")
	}
	if !pattern.MatchString(v) {
		return "", fmt.Errorf("like: %q does not match the pattern %s", v, pattern)
	}
	return v, nil
}

// parseFormat reads a format tag. A Duration may say format:"duration",
// which its type already guarantees, so no rule is kept for it.
func parseFormat(tag reflect.StructTag, leaf *shape) (string, error) {
	v, ok := tag.Lookup("format")
	if !ok {
		return "", nil
	}
	if !knownFormats[v] {
		return "", fmt.Errorf("unknown format %q", v)
	}
	if leaf.kind != kString && !(leaf.kind == kDuration && v == "duration") {
		return "", fmt.Errorf("format applies to strings")
	}
	if leaf.kind != kString {
		return "", nil
	}
	return v, nil
}

// parseDefault reads a default tag into the value a `with` map would
// carry, and checks it against the field's own rules.
func parseDefault(name string, s *shape, r *rules, v string) (any, error) {
	raw, err := defaultValue(s, v)
	if err != nil {
		return nil, fmt.Errorf("default %q: %w", v, err)
	}
	var dc decoder
	dc.value(name, raw, reflect.New(s.t).Elem(), s, r)
	if len(dc.problems) > 0 {
		return nil, fmt.Errorf("default %q: %s", v, dc.problems[0].Message)
	}
	return raw, nil
}

// defaultValue turns a default tag into the JSON-like value a `with` map
// would carry.
func defaultValue(s *shape, v string) (any, error) {
	base := unptr(s)
	if base.kind == kSlice && !strings.HasPrefix(strings.TrimSpace(v), "[") {
		leaf := unptr(base.elem)
		out := []any{}
		if strings.TrimSpace(v) == "" {
			return out, nil
		}
		for _, e := range strings.Split(v, ",") {
			x, err := scalarDefault(leaf, strings.TrimSpace(e))
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		return out, nil
	}
	if x, err := scalarDefault(base, v); err == nil || err != errNotScalar {
		return x, err
	}
	var x any
	if err := json.Unmarshal([]byte(v), &x); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	return x, nil
}

var errNotScalar = fmt.Errorf("not a scalar")

func scalarDefault(s *shape, v string) (any, error) {
	switch s.kind {
	case kString, kDuration:
		return v, nil
	case kBool:
		return strconv.ParseBool(v)
	case kInt:
		return strconv.ParseInt(v, 10, 64)
	case kFloat:
		return strconv.ParseFloat(v, 64)
	}
	return nil, errNotScalar
}
