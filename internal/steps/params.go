package steps

// Params: a step's `with` map is described by a plain Go struct whose tags
// carry the constraints. fieldsOf reads the tags once, at Register; Decode
// (run time), CheckLiteral (load time) and ParamsSchema (the JSON Schema)
// all work from the same parsed fields, so the three never disagree.
//
// Tags:
//
//	json:"name"        the key in `with` (required on every exported field)
//	required:"true"    must be present and not null; a required string must not be empty
//	min:"1" max:"10"   numbers (and Durations, as "30s"); on lists/maps of numbers, each element
//	minlen, maxlen     strings: characters (runes); lists and maps: element count
//	enum:"GET,POST"    strings or integers (each element of a list)
//	pattern:"^v\d+$"   Go regexp, strings (each element of a list)
//	format:"uri"       duration, cidr, ip, uri, semver
//	default:"30s"      applied when the key is absent; lists of scalars as "a,b" or JSON
//	desc:"..."         description in the schema
//
// Conversion rules: YAML integers arrive as int, JSON numbers as float64. An
// integer field accepts any integer and a float64 only when it is integral.
// Nothing converts between strings and numbers or booleans: `port: "80"` is
// an error, and so is `name: 3`. A null value counts as absent.

import (
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/suggest"
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
	semverRe     = regexp.MustCompile(`^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	plainKey     = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
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
	f.rules.minLen, f.rules.maxLen = -1, -1
	tag := sf.Tag
	if v, ok := tag.Lookup("required"); ok {
		if f.required, err = strconv.ParseBool(v); err != nil {
			return f, fmt.Errorf("required tag %q: %w", v, err)
		}
	}
	leaf, base := leafOf(s), unptr(s)
	for _, b := range []struct {
		tag string
		dst **float64
	}{{"min", &f.rules.min}, {"max", &f.rules.max}} {
		v, ok := tag.Lookup(b.tag)
		if !ok {
			continue
		}
		var n float64
		switch leaf.kind {
		case kInt, kFloat:
			if n, err = strconv.ParseFloat(v, 64); err != nil {
				return f, fmt.Errorf("%s tag %q is not a number", b.tag, v)
			}
		case kDuration:
			d, err := time.ParseDuration(v)
			if err != nil {
				return f, fmt.Errorf("%s tag %q is not a duration", b.tag, v)
			}
			n = float64(d)
		default:
			return f, fmt.Errorf("%s applies to numbers and durations; use minlen/maxlen for lengths", b.tag)
		}
		*b.dst = &n
	}
	for _, b := range []struct {
		tag string
		dst *int
	}{{"minlen", &f.rules.minLen}, {"maxlen", &f.rules.maxLen}} {
		v, ok := tag.Lookup(b.tag)
		if !ok {
			continue
		}
		if base.kind != kString && base.kind != kSlice && base.kind != kMap {
			return f, fmt.Errorf("%s applies to strings, lists and maps", b.tag)
		}
		if *b.dst, err = strconv.Atoi(v); err != nil || *b.dst < 0 {
			return f, fmt.Errorf("%s tag %q is not a non-negative integer", b.tag, v)
		}
	}
	if v, ok := tag.Lookup("enum"); ok {
		if leaf.kind != kString && leaf.kind != kInt {
			return f, fmt.Errorf("enum applies to strings and integers")
		}
		for _, e := range strings.Split(v, ",") {
			e = strings.TrimSpace(e)
			if leaf.kind == kInt {
				if _, err := strconv.ParseInt(e, 10, 64); err != nil {
					return f, fmt.Errorf("enum value %q is not an integer", e)
				}
			}
			f.rules.enum = append(f.rules.enum, e)
		}
	}
	if v, ok := tag.Lookup("pattern"); ok {
		if leaf.kind != kString {
			return f, fmt.Errorf("pattern applies to strings")
		}
		if f.rules.pattern, err = regexp.Compile(v); err != nil {
			return f, fmt.Errorf("pattern: %w", err)
		}
	}
	if v, ok := tag.Lookup("format"); ok {
		if !knownFormats[v] {
			return f, fmt.Errorf("unknown format %q", v)
		}
		if leaf.kind != kString && !(leaf.kind == kDuration && v == "duration") {
			return f, fmt.Errorf("format applies to strings")
		}
		if leaf.kind == kString {
			f.rules.format = v
		}
	}
	f.rules.leaf = &rules{min: f.rules.min, max: f.rules.max, minLen: -1, maxLen: -1,
		enum: f.rules.enum, pattern: f.rules.pattern, format: f.rules.format}
	if v, ok := tag.Lookup("default"); ok {
		raw, err := defaultValue(s, v)
		if err != nil {
			return f, fmt.Errorf("default %q: %w", v, err)
		}
		var dc decoder
		dc.value(name, raw, reflect.New(s.t).Elem(), s, &f.rules)
		if len(dc.problems) > 0 {
			return f, fmt.Errorf("default %q: %s", v, dc.problems[0].Message)
		}
		f.hasDef, f.def = true, raw
	}
	return f, nil
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

// Dynamic marks a `with` value whose content is computed by an expression
// and so unknown at load time.
type Dynamic struct{}

// Decode converts an evaluated `with` map (JSON-like values: string, int,
// int64, float64, bool, []any, map[string]any, nil) into a new pointer to
// the params struct, checking types and every per-field constraint, then
// runs Check with no dynamic fields. Unknown keys are problems unless
// OpenParams (then they are returned in extra). When there are problems
// params is nil.
func (d *Descriptor) Decode(with map[string]any) (params any, extra map[string]any, problems []fault.Problem) {
	dc := decoder{}
	p, extra, broken := dc.top(d, with)
	if d.Check != nil {
		dc.problems = append(dc.problems, d.Check(p, broken)...)
	}
	if len(dc.problems) > 0 {
		return nil, extra, dc.problems
	}
	return p, extra, nil
}

// CheckLiteral validates `with` at load time. Values that are Dynamic (at
// any depth) are skipped for type and constraint checks but count as
// present for `required`; Check runs on a best-effort decoded struct with
// the dynamic top-level fields (and those that already have a problem) and
// the paths of dynamic values nested in literal ones.
func (d *Descriptor) CheckLiteral(with map[string]any) []fault.Problem {
	dc := decoder{literal: true}
	p, _, skip := dc.top(d, with)
	if d.Check != nil {
		dc.problems = append(dc.problems, d.Check(p, skip)...)
	}
	return dc.problems
}

// DecodeLiteral decodes `with` as CheckLiteral does: values that are
// Dynamic are left zero and named in dynamic (top-level fields, with those
// that have a problem, and nested paths). For checks that run on literal
// values only.
func (d *Descriptor) DecodeLiteral(with map[string]any) (params any, dynamic map[string]bool) {
	dc := decoder{literal: true}
	p, _, skip := dc.top(d, with)
	return p, skip
}

// SetString sets the top-level string param named name (its JSON name) in
// params, a pointer returned by Decode or DecodeLiteral. It reports false
// when there is no such string param. `runbook plan` uses it to show a
// value computed at run time as a placeholder in the calls it plans.
func (d *Descriptor) SetString(params any, name, value string) bool {
	v := reflect.ValueOf(params)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Type() != d.params {
		return false
	}
	for _, f := range d.fields {
		if f.name != name {
			continue
		}
		fv, err := v.Elem().FieldByIndexErr(f.index)
		if err != nil || fv.Kind() != reflect.String || !fv.CanSet() {
			return false
		}
		fv.SetString(value)
		return true
	}
	return false
}

// SetScalar sets the top-level param name of decoded params to v, a
// string, float64, bool or []string converted to the field's kind (through a
// pointer field too). It reports whether the field took it. `runbook
// plan` uses it to trace a value known only at run time through a Plan
// hook.
func (d *Descriptor) SetScalar(params any, name string, v any) bool {
	pv := reflect.ValueOf(params)
	if pv.Kind() != reflect.Pointer || pv.IsNil() || pv.Elem().Type() != d.params {
		return false
	}
	for _, f := range d.fields {
		if f.name != name {
			continue
		}
		fv, err := pv.Elem().FieldByIndexErr(f.index)
		if err != nil || !fv.CanSet() {
			return false
		}
		if fv.Kind() == reflect.Pointer {
			nv := reflect.New(fv.Type().Elem())
			if !setScalar(nv.Elem(), v) {
				return false
			}
			fv.Set(nv)
			return true
		}
		return setScalar(fv, v)
	}
	return false
}

func setScalar(fv reflect.Value, v any) bool {
	switch x := v.(type) {
	case string:
		if fv.Kind() == reflect.String {
			fv.SetString(x)
			return true
		}
	case []string:
		if fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.String {
			out := reflect.MakeSlice(fv.Type(), len(x), len(x))
			for i, e := range x {
				out.Index(i).SetString(e)
			}
			fv.Set(out)
			return true
		}
	case bool:
		if fv.Kind() == reflect.Bool {
			fv.SetBool(x)
			return true
		}
	case float64:
		switch fv.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			if fv.OverflowInt(int64(x)) {
				return false
			}
			fv.SetInt(int64(x))
			return true
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			if x < 0 || fv.OverflowUint(uint64(x)) {
				return false
			}
			fv.SetUint(uint64(x))
			return true
		case reflect.Float32, reflect.Float64:
			fv.SetFloat(x)
			return true
		}
	}
	return false
}

// ParamNames returns the JSON names of the params (for "did you mean").
func (d *Descriptor) ParamNames() []string {
	out := make([]string, len(d.fields))
	for i, f := range d.fields {
		out[i] = f.name
	}
	return out
}

// decoder collects problems while converting JSON-like values. In literal
// mode Dynamic values are accepted anywhere and left zero.
type decoder struct {
	literal  bool
	problems []fault.Problem
	dynamic  map[string]bool // paths of Dynamic values below the top level
}

// markDynamic records the path of a Dynamic value met in literal mode.
func (dc *decoder) markDynamic(path string) {
	if dc.dynamic == nil {
		dc.dynamic = map[string]bool{}
	}
	dc.dynamic[path] = true
}

func (dc *decoder) add(path, format string, args ...any) {
	dc.problems = append(dc.problems, fault.Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// top decodes the whole `with` map. skip holds the top-level names that are
// dynamic or have a problem, and the paths of dynamic values inside them
// ("tag_list[0].tagValue", "dataset_list[1]"); Check must not reason about
// them.
func (dc *decoder) top(d *Descriptor, with map[string]any) (params any, extra map[string]any, skip map[string]bool) {
	var dst reflect.Value
	if d.params != nil {
		pv := reflect.New(d.params)
		dst, params = pv.Elem(), pv.Interface()
	}
	skip = map[string]bool{}
	extra = dc.object("", with, dst, d.fields, d.OpenParams, skip)
	for p := range dc.dynamic {
		skip[p] = true
	}
	if len(skip) == 0 {
		skip = nil
	}
	return params, extra, skip
}

// object decodes m into the struct dst. Unknown keys go to the returned
// map when open, else are problems.
func (dc *decoder) object(path string, m map[string]any, dst reflect.Value, fs []field, open bool, skip map[string]bool) map[string]any {
	for i := range fs {
		f := &fs[i]
		p := joinPath(path, f.name)
		v, present := m[f.name]
		if !present || v == nil {
			switch {
			case f.hasDef:
				dc.value(p, f.def, dst.FieldByIndex(f.index), f.shape, &f.rules)
			case f.required:
				dc.add(p, "is required")
				if skip != nil {
					skip[f.name] = true
				}
			}
			continue
		}
		if _, dyn := v.(Dynamic); dyn && dc.literal {
			if skip != nil {
				skip[f.name] = true
			} else {
				dc.markDynamic(p)
			}
			continue
		}
		before := len(dc.problems)
		dc.value(p, v, dst.FieldByIndex(f.index), f.shape, &f.rules)
		if f.required && unptr(f.shape).kind == kString && len(dc.problems) == before {
			if s, _ := v.(string); s == "" {
				dc.add(p, "is required (got an empty string)")
			}
		}
		if len(dc.problems) > before && skip != nil {
			skip[f.name] = true
		}
	}
	var extra map[string]any
	var unknown []string
	for k, v := range m {
		if fieldIndex(fs, k) >= 0 {
			continue
		}
		if open {
			if extra == nil {
				extra = map[string]any{}
			}
			extra[k] = v
			continue
		}
		unknown = append(unknown, k)
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		dc.add(keyPath(path, k), "%s", unknownMessage(k, fs))
	}
	return extra
}

func fieldIndex(fs []field, name string) int {
	for i := range fs {
		if fs[i].name == name {
			return i
		}
	}
	return -1
}

func unknownMessage(k string, fs []field) string {
	if len(fs) == 0 {
		return fmt.Sprintf("unknown parameter %q; this step takes no parameters", k)
	}
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.name
	}
	if s := suggest.Closest(k, names); s != "" {
		return fmt.Sprintf("unknown parameter %q; did you mean %q?", k, s)
	}
	return fmt.Sprintf("unknown parameter %q; known parameters: %s", k, strings.Join(names, ", "))
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func keyPath(path, key string) string {
	if plainKey.MatchString(key) {
		return joinPath(path, key)
	}
	return path + "[" + strconv.Quote(key) + "]"
}

// value decodes v into dst according to s, applying r (may be nil).
func (dc *decoder) value(path string, v any, dst reflect.Value, s *shape, r *rules) {
	if _, dyn := v.(Dynamic); dyn {
		if !dc.literal {
			dc.add(path, "is an unevaluated expression")
		} else {
			dc.markDynamic(path)
		}
		return
	}
	if v == nil && s.kind != kAny {
		if s.kind != kPtr {
			dc.add(path, "must be %s (got null)", typeWord(s))
		}
		return
	}
	switch s.kind {
	case kPtr:
		pv := reflect.New(s.elem.t)
		before := len(dc.problems)
		dc.value(path, v, pv.Elem(), s.elem, r)
		if len(dc.problems) == before {
			dst.Set(pv)
		}
	case kAny:
		if v != nil {
			dst.Set(reflect.ValueOf(v))
		}
	case kString:
		str, ok := v.(string)
		if !ok {
			dc.add(path, "must be a string (got %s)", describe(v))
			return
		}
		if dc.checkString(path, str, r) {
			dst.SetString(str)
		}
	case kBool:
		b, ok := v.(bool)
		if !ok {
			dc.add(path, "must be a boolean (got %s)", describe(v))
			return
		}
		dst.SetBool(b)
	case kInt:
		n, ok := asInt(v)
		if !ok || dst.OverflowInt(n) {
			dc.add(path, "must be an integer (got %s)", describe(v))
			return
		}
		if dc.checkNumber(path, float64(n), strconv.FormatInt(n, 10), r) {
			dst.SetInt(n)
		}
	case kFloat:
		f, ok := asFloat(v)
		if !ok {
			dc.add(path, "must be a number (got %s)", describe(v))
			return
		}
		if dc.checkNumber(path, f, formatNumber(f), r) {
			dst.SetFloat(f)
		}
	case kDuration:
		dv, ok := dc.duration(path, v)
		if ok && dc.checkDuration(path, dv, r) {
			dst.SetInt(int64(dv))
		}
	case kSlice:
		list, ok := asList(v)
		if !ok {
			dc.add(path, "must be a list (got %s)", describe(v))
			return
		}
		dc.checkCount(path, len(list), "items", r)
		out := reflect.MakeSlice(s.t, len(list), len(list))
		for i, e := range list {
			dc.value(path+"["+strconv.Itoa(i)+"]", e, out.Index(i), s.elem, leafRules(r))
		}
		dst.Set(out)
	case kMap:
		m, ok := asMap(v)
		if !ok {
			dc.add(path, "must be a map (got %s)", describe(v))
			return
		}
		dc.checkCount(path, len(m), "entries", r)
		out := reflect.MakeMapWithSize(s.t, len(m))
		for _, k := range sortedKeys(m) {
			ev := reflect.New(s.elem.t).Elem()
			dc.value(keyPath(path, k), m[k], ev, s.elem, leafRules(r))
			out.SetMapIndex(reflect.ValueOf(k).Convert(s.t.Key()), ev)
		}
		dst.Set(out)
	case kStruct:
		m, ok := asMap(v)
		if !ok {
			dc.add(path, "must be a map (got %s)", describe(v))
			return
		}
		dc.object(path, m, dst, s.fields, false, nil)
	}
}

func leafRules(r *rules) *rules {
	if r == nil {
		return nil
	}
	return r.leaf
}

func (dc *decoder) duration(path string, v any) (Duration, bool) {
	if s, ok := v.(string); ok {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			dc.add(path, "must be a duration like 30s or 5m (got %s)", quote(s))
			return 0, false
		}
		if d < 0 {
			dc.add(path, "must not be negative (got %s)", quote(s))
			return 0, false
		}
		return Duration(d), true
	}
	n, ok := asInt(v)
	if !ok {
		dc.add(path, "must be a duration like 30s or 5m (got %s)", describe(v))
		return 0, false
	}
	if n < 0 || n > math.MaxInt64/int64(time.Second) {
		dc.add(path, "must be a duration like 30s or 5m (got %s)", describe(v))
		return 0, false
	}
	return Duration(time.Duration(n) * time.Second), true
}

func (dc *decoder) checkString(path, s string, r *rules) bool {
	if r == nil {
		return true
	}
	ok := true
	if r.minLen >= 0 || r.maxLen >= 0 {
		n := utf8.RuneCountInString(s)
		if msg := lengthMessage(n, r.minLen, r.maxLen, "characters"); msg != "" {
			dc.add(path, "%s", msg)
			ok = false
		}
	}
	if len(r.enum) > 0 && !contains(r.enum, s) {
		msg := fmt.Sprintf("must be one of %s (got %s)", strings.Join(r.enum, ", "), quote(s))
		for _, e := range r.enum {
			if strings.EqualFold(e, s) {
				msg += fmt.Sprintf("; did you mean %q?", e)
				break
			}
		}
		dc.add(path, "%s", msg)
		return false
	}
	if r.pattern != nil && !r.pattern.MatchString(s) {
		dc.add(path, "must match %s (got %s)", r.pattern, quote(s))
		ok = false
	}
	if r.format != "" {
		if msg := checkFormat(r.format, s); msg != "" {
			dc.add(path, "%s (got %s)", msg, quote(s))
			ok = false
		}
	}
	return ok
}

// checkFormat returns what is wrong with s for format, or "".
func checkFormat(format, s string) string {
	switch format {
	case "duration":
		if _, err := time.ParseDuration(s); err != nil {
			return "must be a duration like 30s or 5m"
		}
	case "cidr":
		if _, err := netip.ParsePrefix(s); err != nil {
			return "must be a CIDR like 10.0.0.0/16"
		}
	case "ip":
		if _, err := netip.ParseAddr(s); err != nil {
			return "must be an IP address like 10.0.0.1"
		}
	case "uri":
		u, err := url.Parse(s)
		if err != nil || u.Scheme == "" || (u.Host == "" && u.Opaque == "" && u.Path == "") {
			return "must be an absolute URI like https://example.com/path"
		}
	case "semver":
		if !semverRe.MatchString(s) {
			return "must be a semantic version like v1.2.3"
		}
	}
	return ""
}

func (dc *decoder) checkNumber(path string, f float64, text string, r *rules) bool {
	if r == nil {
		return true
	}
	if msg := rangeMessage(f, r.min, r.max, formatNumber); msg != "" {
		dc.add(path, "%s (got %s)", msg, text)
		return false
	}
	if len(r.enum) > 0 && !contains(r.enum, text) {
		dc.add(path, "must be one of %s (got %s)", strings.Join(r.enum, ", "), text)
		return false
	}
	return true
}

func (dc *decoder) checkDuration(path string, d Duration, r *rules) bool {
	if r == nil {
		return true
	}
	f := func(x float64) string { return Duration(x).String() }
	if msg := rangeMessage(float64(d), r.min, r.max, f); msg != "" {
		dc.add(path, "%s (got %s)", msg, d)
		return false
	}
	return true
}

func (dc *decoder) checkCount(path string, n int, unit string, r *rules) {
	if r == nil {
		return
	}
	if msg := lengthMessage(n, r.minLen, r.maxLen, unit); msg != "" {
		msg = strings.Replace(msg, "must be", "must have", 1)
		dc.add(path, "%s", msg)
	}
}

func rangeMessage(f float64, lo, hi *float64, format func(float64) string) string {
	switch {
	case lo != nil && hi != nil && (f < *lo || f > *hi):
		return fmt.Sprintf("must be between %s and %s", format(*lo), format(*hi))
	case lo != nil && f < *lo:
		return fmt.Sprintf("must be at least %s", format(*lo))
	case hi != nil && f > *hi:
		return fmt.Sprintf("must be at most %s", format(*hi))
	}
	return ""
}

func lengthMessage(n, lo, hi int, unit string) string {
	switch {
	case lo >= 0 && hi >= 0 && (n < lo || n > hi):
		if lo == hi {
			return fmt.Sprintf("must be exactly %d %s (got %d)", lo, unit, n)
		}
		return fmt.Sprintf("must be between %d and %d %s (got %d)", lo, hi, unit, n)
	case lo >= 0 && n < lo:
		return fmt.Sprintf("must be at least %d %s (got %d)", lo, unit, n)
	case hi >= 0 && n > hi:
		return fmt.Sprintf("must be at most %d %s (got %d)", hi, unit, n)
	}
	return ""
}

func formatNumber(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// quote quotes s for a message, shortening long values.
func quote(s string) string {
	if utf8.RuneCountInString(s) > 60 {
		r := []rune(s)
		return strconv.Quote(string(r[:57])) + "..."
	}
	return strconv.Quote(s)
}

// describe names the JSON type and value of v for "got ..." messages.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return "string " + quote(x)
	case bool:
		return "boolean " + strconv.FormatBool(x)
	case float64:
		return "number " + formatNumber(x)
	case float32:
		return "number " + formatNumber(float64(x))
	case json.Number:
		return "number " + x.String()
	case Dynamic:
		return "an expression"
	}
	if n, ok := asInt(v); ok {
		return "integer " + strconv.FormatInt(n, 10)
	}
	if _, ok := asList(v); ok {
		return "a list"
	}
	if _, ok := asMap(v); ok {
		return "a map"
	}
	return fmt.Sprintf("%T", v)
}

func typeWord(s *shape) string {
	switch unptr(s).kind {
	case kString:
		return "a string"
	case kBool:
		return "a boolean"
	case kInt:
		return "an integer"
	case kFloat:
		return "a number"
	case kDuration:
		return "a duration like 30s or 5m"
	case kSlice:
		return "a list"
	case kMap, kStruct:
		return "a map"
	}
	return "a value"
}

// asInt accepts Go integers and integral floats.
func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int64:
		return x, true
	case int32:
		return int64(x), true
	case int16:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint:
		return int64(x), x <= math.MaxInt64
	case uint64:
		return int64(x), x <= math.MaxInt64
	case uint32:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint8:
		return int64(x), true
	case float64:
		if x != math.Trunc(x) || x < math.MinInt64 || x >= math.MaxInt64 {
			return 0, false
		}
		return int64(x), true
	case float32:
		return asInt(float64(x))
	case json.Number:
		n, err := x.Int64()
		return n, err == nil
	}
	return 0, false
}

func asFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, !math.IsNaN(x) && !math.IsInf(x, 0)
	case float32:
		return asFloat(float64(x))
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	if n, ok := asInt(v); ok {
		return float64(n), true
	}
	return 0, false
}

func asList(v any) ([]any, bool) {
	switch x := v.(type) {
	case []any:
		return x, true
	case nil, string, []byte:
		return nil, false
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
		return nil, false
	}
	out := make([]any, rv.Len())
	for i := range out {
		out[i] = rv.Index(i).Interface()
	}
	return out, true
}

func asMap(v any) (map[string]any, bool) {
	switch x := v.(type) {
	case map[string]any:
		return x, true
	case nil:
		return nil, false
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Map || rv.Type().Key().Kind() != reflect.String {
		return nil, false
	}
	out := make(map[string]any, rv.Len())
	it := rv.MapRange()
	for it.Next() {
		out[it.Key().String()] = it.Value().Interface()
	}
	return out, true
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
