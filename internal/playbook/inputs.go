package playbook

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/runbook/runbook/internal/jsonvalue"
	"github.com/runbook/runbook/internal/yamlnode"
	yaml "go.yaml.in/yaml/v4"
)

var inputTypes = []string{"string", "integer", "number", "boolean", "list", "map"}

var inputKeys = []string{"type", "required", "default", "enum", "pattern", "min", "max", "description", "secret"}

// inputs decodes the `inputs:` mapping and returns the declared types by
// name (the expression type environment).
func (l *loader) inputs(pb *Playbook, o *yamlnode.Object) map[string]string {
	types := map[string]string{}
	n := o.Get("inputs")
	if n == nil {
		return types
	}
	m := yamlnode.Mapping(l.errf, n, "inputs")
	if m == nil {
		return types
	}
	for _, p := range m.Pairs {
		path := yamlnode.KeyPath("inputs", p.Name)
		if !identRE().MatchString(p.Name) {
			l.errf(p.Key, path, "invalid input name %q: use letters, digits and _, not starting with a digit", p.Name)
		}
		in := &Input{Name: p.Name, Type: "string", Pos: l.pos(p.Key)}
		if !yamlnode.IsNull(p.Val) {
			l.input(in, p.Val, path)
		}
		types[in.Name] = in.Type
		pb.Inputs = append(pb.Inputs, in)
	}
	return types
}

// inputSecret reads an input's secret key. Masking works on text: a
// secret number or list would be stored and shown as it is, so only a
// string input may be secret.
func (l *loader) inputSecret(in *Input, v *yaml.Node, path string) {
	in.Secret, _ = l.Bool(v, path)
	if in.Secret && in.Type != "" && in.Type != "string" {
		l.errf(v, path, "secret applies to string inputs, not %s (a secret is masked as text)", in.Type)
	}
}

func (l *loader) input(in *Input, n *yaml.Node, path string) {
	o := yamlnode.Strict(l.errf, n, path, inputKeys...)
	if o == nil {
		return
	}
	if t := o.Get("type"); t != nil {
		if s, ok := l.oneOf(t, yamlnode.JoinPath(path, "type"), inputTypes...); ok {
			in.Type = s
		}
	}
	if v := o.Get("required"); v != nil {
		in.Required, _ = l.Bool(v, yamlnode.JoinPath(path, "required"))
	}
	if v := o.Get("secret"); v != nil {
		l.inputSecret(in, v, yamlnode.JoinPath(path, "secret"))
	}
	if v := o.Get("description"); v != nil {
		in.Description, _ = l.Str(v, yamlnode.JoinPath(path, "description"))
	}
	if v := o.Get("pattern"); v != nil {
		if s, ok := l.Str(v, yamlnode.JoinPath(path, "pattern")); ok {
			if _, err := regexp.Compile(s); err != nil {
				l.errf(v, yamlnode.JoinPath(path, "pattern"), "invalid pattern: %v", err)
			} else if in.Type != "string" && in.Type != "list" {
				l.errf(v, yamlnode.JoinPath(path, "pattern"), "pattern applies to string inputs, not %s", in.Type)
			} else {
				in.Pattern = s
			}
		}
	}
	for _, k := range []string{"min", "max"} {
		v := o.Get(k)
		if v == nil {
			continue
		}
		f, ok := l.Number(v, yamlnode.JoinPath(path, k))
		if !ok {
			continue
		}
		if in.Type == "boolean" {
			l.errf(v, yamlnode.JoinPath(path, k), "%s does not apply to boolean inputs", k)
			continue
		}
		if k == "min" {
			in.Min = &f
		} else {
			in.Max = &f
		}
	}
	if in.Min != nil && in.Max != nil && *in.Min > *in.Max {
		l.errf(o.Get("max"), yamlnode.JoinPath(path, "max"), "max (%s) is below min (%s)", fmtNum(*in.Max), fmtNum(*in.Min))
	}
	if v := o.Get("enum"); v != nil {
		if items, ok := l.List(v, yamlnode.JoinPath(path, "enum")); ok {
			for i, it := range items {
				ip := yamlnode.IndexPath(yamlnode.JoinPath(path, "enum"), i)
				x, ok := l.Value(it, ip)
				if !ok {
					continue
				}
				if msg := typeProblem(in.Type, x); msg != "" {
					l.errf(it, ip, "%s", msg)
					continue
				}
				in.Enum = append(in.Enum, x)
			}
		}
	}
	if p, ok := o.Lookup("default"); ok {
		dp := yamlnode.JoinPath(path, "default")
		x, vok := l.Value(p.Val, dp)
		if vok {
			in.Default, in.HasDefault = x, true
			if x != nil {
				if err := in.Check(x); err != nil {
					l.errf(p.Val, dp, "%v", err)
				}
			}
		}
	}
}

// Check reports whether v (a JSON-like value: string, int, float64, bool,
// []any, map[string]any) is acceptable for the input: its type, enum,
// pattern, and min/max (the value for numbers; the length for strings and
// lists).
func (in *Input) Check(v any) error {
	if msg := typeProblem(in.Type, v); msg != "" {
		return fmt.Errorf("%s", msg)
	}
	if len(in.Enum) > 0 {
		found := false
		for _, e := range in.Enum {
			if sameValue(e, v) {
				found = true
				break
			}
		}
		if !found {
			words := make([]string, len(in.Enum))
			for i, e := range in.Enum {
				words[i] = describe(e)
			}
			return fmt.Errorf("must be one of %s (got %s)", strings.Join(words, ", "), describe(v))
		}
	}
	if in.Pattern != "" {
		re, err := compilePattern(in.Pattern)
		if err == nil {
			check := func(s string) error {
				if !re.MatchString(s) {
					return fmt.Errorf("%s does not match pattern %s", describe(s), in.Pattern)
				}
				return nil
			}
			switch x := v.(type) {
			case string:
				if err := check(x); err != nil {
					return err
				}
			case []any:
				for _, e := range x {
					if s, ok := e.(string); ok {
						if err := check(s); err != nil {
							return err
						}
					}
				}
			}
		}
	}
	var n float64
	unit := ""
	switch x := v.(type) {
	case int:
		n = float64(x)
	case float64:
		n = x
	case string:
		n, unit = float64(utf8.RuneCountInString(x)), " characters"
	case []any:
		n, unit = float64(len(x)), " items"
	case map[string]any:
		n, unit = float64(len(x)), " entries"
	default:
		return nil
	}
	lo, hi := in.Min, in.Max
	if (lo != nil && n < *lo) || (hi != nil && n > *hi) {
		what := "must be"
		if unit != "" {
			what = "length must be"
		}
		switch {
		case lo != nil && hi != nil:
			return fmt.Errorf("%s between %s and %s%s (got %s)", what, fmtNum(*lo), fmtNum(*hi), unit, fmtNum(n))
		case lo != nil:
			return fmt.Errorf("%s at least %s%s (got %s)", what, fmtNum(*lo), unit, fmtNum(n))
		default:
			return fmt.Errorf("%s at most %s%s (got %s)", what, fmtNum(*hi), unit, fmtNum(n))
		}
	}
	return nil
}

// typeProblem says why v is not of the input type t ("" when it is).
func typeProblem(t string, v any) string {
	ok := false
	switch t {
	case "string":
		_, ok = v.(string)
	case "integer":
		switch x := v.(type) {
		case int:
			ok = true
		case float64:
			ok = x == math.Trunc(x)
		}
	case "number":
		switch v.(type) {
		case int, float64:
			ok = true
		}
	case "boolean":
		_, ok = v.(bool)
	case "list":
		_, ok = v.([]any)
	case "map":
		_, ok = v.(map[string]any)
	}
	if ok {
		return ""
	}
	article := "a "
	if t == "integer" {
		article = "an "
	}
	return fmt.Sprintf("must be %s%s (got %s)", article, t, jsonvalue.Kind(v))
}

func sameValue(a, b any) bool {
	fa, aNum := toFloat(a)
	fb, bNum := toFloat(b)
	if aNum && bNum {
		return fa == fb
	}
	return reflect.DeepEqual(a, b)
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

func describe(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("%q", x)
	case int:
		return fmt.Sprint(x)
	case float64:
		return fmtNum(x)
	case nil:
		return "null"
	}
	return fmt.Sprint(v)
}

func fmtNum(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// patterns holds input patterns compiled by compilePattern: an input is
// checked for every run a webhook or a schedule starts, and compiling its
// pattern each time cost a tenth of serve's CPU under webhook load. At
// most maxPatterns are kept (playbooks declare few; a reload adds its
// new ones).
var (
	patterns  sync.Map // pattern -> *regexp.Regexp
	npatterns atomic.Int32
)

const maxPatterns = 1024

func compilePattern(p string) (*regexp.Regexp, error) {
	if re, ok := patterns.Load(p); ok {
		return re.(*regexp.Regexp), nil
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, err
	}
	if npatterns.Load() < maxPatterns {
		if _, loaded := patterns.LoadOrStore(p, re); !loaded {
			npatterns.Add(1)
		}
	}
	return re, nil
}
