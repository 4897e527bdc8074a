package steps

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/suggest"
)

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
	extra = dc.object("", with, dst, d.paramFields(), d.OpenParams, skip)
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
	if plainKey(key) {
		return joinPath(path, key)
	}
	return path + "[" + strconv.Quote(key) + "]"
}

// plainKey reports whether key is written as is in a path: letters,
// digits, _ and -, at least one.
func plainKey(key string) bool {
	for i := 0; i < len(key); i++ {
		switch c := key[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return key != ""
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
	case kString, kBool:
		dc.text(path, v, dst, s.kind, r)
	case kInt, kFloat, kDuration:
		dc.number(path, v, dst, s.kind, r)
	case kSlice:
		dc.list(path, v, dst, s, r)
	case kMap:
		dc.dict(path, v, dst, s, r)
	case kStruct:
		m, ok := asMap(v)
		if !ok {
			dc.add(path, "must be a map (got %s)", describe(v))
			return
		}
		dc.object(path, m, dst, s.fields, false, nil)
	}
}

// text decodes a string or a boolean.
func (dc *decoder) text(path string, v any, dst reflect.Value, k kind, r *rules) {
	if k == kBool {
		b, ok := v.(bool)
		if !ok {
			dc.add(path, "must be a boolean (got %s)", describe(v))
			return
		}
		dst.SetBool(b)
		return
	}
	str, ok := v.(string)
	if !ok {
		dc.add(path, "must be a string (got %s)", describe(v))
		return
	}
	if dc.checkString(path, str, r) {
		dst.SetString(str)
	}
}

// number decodes an integer, a float or a Duration.
func (dc *decoder) number(path string, v any, dst reflect.Value, k kind, r *rules) {
	switch k {
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
	}
}

// list decodes a list, checking its length and then each element.
func (dc *decoder) list(path string, v any, dst reflect.Value, s *shape, r *rules) {
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
}

// dict decodes a map with string keys, checking its size and then each
// value, in key order.
func (dc *decoder) dict(path string, v any, dst reflect.Value, s *shape, r *rules) {
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
