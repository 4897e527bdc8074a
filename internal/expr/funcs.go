package expr

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/expr-lang/expr/builtin"
	"github.com/expr-lang/expr/vm/runtime"

	"github.com/runbook/runbook/internal/jsonvalue"
)

// funcSpec is one function of this package. Every call is rewritten to
// "__name(__rt, args...)" so that the function can read the clock and
// count what it builds against the bounds of the evaluation.
type funcSpec struct {
	min, max int // max < 0: variadic
	fn       func(rt *evalState, args []any) (any, error)
}

func (f funcSpec) arity() string {
	switch {
	case f.max < 0:
		return fmt.Sprintf("at least %d", f.min)
	case f.min == f.max:
		return fmt.Sprint(f.min)
	}
	return fmt.Sprintf("%d to %d", f.min, f.max)
}

var funcSpecs map[string]funcSpec

// countedBuiltins are expr-lang builtins whose results this package
// measures (their output is linear in their input, but a closure may call
// them a million times); they keep their expr-lang behaviour.
var countedBuiltins = map[string][2]int{
	"keys": {1, 1}, "values": {1, 1}, "toPairs": {1, 1}, "fromPairs": {1, 1},
	"split": {2, 3}, "splitAfter": {2, 3}, "upper": {1, 1}, "lower": {1, 1},
	"toBase64": {1, 1}, "fromBase64": {1, 1}, "fromJSON": {1, 1},
	"sort": {1, 2}, "uniq": {1, 1}, "reverse": {1, 1},
}

// replacedBuiltins are the expr-lang builtins this package's functions
// replace (same name, bounded implementation).
var replacedBuiltins []string

var hiddenFuncs = map[string]*builtin.Function{}

func isReplaced(name string) bool { _, ok := funcSpecs[name]; return ok }

func functionNames() []string {
	names := keys(funcSpecs)
	for _, b := range builtin.Builtins {
		if !isReplaced(b.Name) {
			names = append(names, b.Name)
		}
	}
	for s := range statusFuncs {
		names = append(names, s)
	}
	return names
}

func init() {
	funcSpecs = map[string]funcSpec{
		// time
		"now":         {0, 0, fnNow},
		"parseTime":   {1, 2, fnParseTime},
		"formatTime":  {2, 2, fnFormatTime},
		"addDuration": {2, 2, fnAddDuration},
		"since":       {1, 1, fnSince},
		"unix":        {1, 1, fnUnix},
		// data
		"toJSON":   {1, 1, fnToJSON},
		"string":   {1, 1, fnString},
		"default":  {2, 2, fnDefault},
		"coalesce": {1, -1, fnCoalesce},
		"concat":   {1, -1, fnConcat},
		"flatten":  {1, 1, fnFlatten},
		// inventory
		"hosts": {0, 1, fnHosts},
		// semver
		"semverCompare":   {2, 2, fnSemverCompare},
		"semverSatisfies": {2, 2, fnSemverSatisfies},
		// network
		"cidrContains": {2, 2, fnCIDRContains},
		"cidrOverlaps": {2, 2, fnCIDROverlaps},
		"cidrPrefix":   {1, 1, fnCIDRPrefix},
		"cidrHost":     {2, 2, fnCIDRHost},
		// strings
		"replace":      {3, 3, fnReplace},
		"join":         {1, 2, fnJoin},
		"repeat":       {2, 2, fnRepeat},
		"format":       {1, -1, fnFormat},
		"truncate":     {2, 2, fnTruncate},
		"slug":         {1, 1, fnSlug},
		"shellQuote":   {1, 1, fnShellQuote},
		"sha256":       {1, 1, fnSHA256},
		"base64Encode": {1, 1, fnBase64Encode},
		"base64Decode": {1, 1, fnBase64Decode},
		"urlEncode":    {1, 1, fnURLEncode},
	}
	for name, ar := range countedBuiltins {
		b := builtin.Builtins[builtin.Index[name]]
		funcSpecs[name] = funcSpec{ar[0], ar[1], counted(b)}
	}
	for name, spec := range funcSpecs {
		if _, ok := builtin.Index[name]; ok {
			replacedBuiltins = append(replacedBuiltins, name)
		}
		fn := spec.fn
		hiddenFuncs["__"+name] = &builtin.Function{
			Name: "__" + name,
			Func: func(args ...any) (any, error) {
				rt, ok := args[0].(*evalState)
				if !ok {
					return nil, fmt.Errorf("%s: internal error: no evaluation state", name)
				}
				out, err := fn(rt, args[1:])
				if err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
				return out, nil
			},
		}
	}
	sort.Strings(replacedBuiltins)
	hiddenFuncs["__tick"] = &builtin.Function{Name: "__tick", Func: fnTick}
	hiddenFuncs["__add"] = &builtin.Function{Name: "__add", Func: fnAdd}
	hiddenFuncs["__matches"] = &builtin.Function{Name: "__matches", Func: fnMatches}
	hiddenFuncs["__strget"] = &builtin.Function{Name: "__strget", Func: fnStrGet}
}

func fnTick(args ...any) (any, error) {
	rt := args[0].(*evalState)
	rt.ticks++
	if rt.ticks > MaxIterations {
		return nil, fmt.Errorf("%w: more than %d closure iterations", ErrTooExpensive, MaxIterations)
	}
	// Iterations may each be costly (a regexp or a scan of a long string):
	// closures also stop after MaxClosureTime.
	switch {
	case rt.ticks == 1:
		rt.start = time.Now()
	case rt.ticks%256 == 0:
		if time.Since(rt.start) > MaxClosureTime {
			return nil, fmt.Errorf("%w: closures ran longer than %v", ErrTooExpensive, MaxClosureTime)
		}
	}
	return nil, nil
}

func fnAdd(args ...any) (any, error) {
	rt := args[0].(*evalState)
	a, b := args[1], args[2]
	if sa, ok := a.(string); ok {
		if sb, ok := b.(string); ok {
			if err := rt.grow(len(sa) + len(sb)); err != nil {
				return nil, err
			}
			return sa + sb, nil
		}
	}
	return runtime.Add(a, b), nil
}

func fnMatches(args ...any) (any, error) {
	rt := args[0].(*evalState)
	s, ok1 := args[1].(string)
	pat, ok2 := args[2].(string)
	if args[1] == nil || args[2] == nil {
		return false, nil
	}
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("matches wants strings, got %s and %s", jsonvalue.Kind(args[1]), jsonvalue.Kind(args[2]))
	}
	if len(pat) > 16<<10 {
		return nil, fmt.Errorf("%w: regular expression longer than 16 KiB", ErrTooExpensive)
	}
	if err := rt.grow(16 * len(pat)); err != nil { // compiling costs more than copying
		return nil, err
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		return nil, err
	}
	return re.MatchString(s), nil
}

// fnStrGet is env.X / secrets.X: nil when X is missing.
func fnStrGet(args ...any) (any, error) {
	m, key := args[0], args[1]
	if sm, ok := m.(map[string]string); ok {
		k, ok := key.(string)
		if !ok {
			return nil, fmt.Errorf("key must be a string, got %s", jsonvalue.Kind(key))
		}
		if v, ok := sm[k]; ok {
			return v, nil
		}
		return nil, nil
	}
	if m == nil {
		return nil, nil
	}
	return runtime.Fetch(m, key), nil
}

// counted wraps an expr-lang builtin so that the size of its result counts
// against MaxOutputBytes.
func counted(b *builtin.Function) func(rt *evalState, args []any) (any, error) {
	return func(rt *evalState, args []any) (out any, err error) {
		switch {
		case b.Safe != nil:
			out, _, err = b.Safe(args...)
		case b.Func != nil:
			out, err = b.Func(args...)
		default:
			out = b.Fast(args[0])
		}
		if err != nil {
			return nil, err
		}
		return out, rt.grow(shallowSize(out))
	}
}

func shallowSize(v any) int {
	switch x := v.(type) {
	case string:
		return len(x)
	case []any:
		return 16 * len(x)
	case nil, bool, int, float64:
		return 0
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		return 16 * rv.Len()
	case reflect.Map:
		return 32 * rv.Len()
	case reflect.String:
		return rv.Len()
	}
	return 0
}

func argString(name string, v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s must be a string, got %s", name, jsonvalue.Kind(v))
	}
	return s, nil
}

func argInt(name string, v any) (int, error) {
	switch x := v.(type) {
	case int:
		return x, nil
	case int64:
		return int(x), nil
	case float64:
		if x == float64(int(x)) {
			return int(x), nil
		}
	}
	return 0, fmt.Errorf("%s must be an integer, got %s", name, jsonvalue.Kind(v))
}

func argTime(v any) (time.Time, error) {
	switch x := v.(type) {
	case time.Time:
		return x, nil
	case string:
		return parseTimeDefault(x)
	}
	return time.Time{}, fmt.Errorf("want a time or an RFC 3339 string, got %s", jsonvalue.Kind(v))
}

func argDuration(v any) (time.Duration, error) {
	switch x := v.(type) {
	case time.Duration:
		return x, nil
	case string:
		return time.ParseDuration(x)
	}
	return 0, fmt.Errorf("want a duration or a duration string like \"1h30m\", got %s", jsonvalue.Kind(v))
}

func parseTimeDefault(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("cannot parse %q as an RFC 3339 time or a date (2006-01-02)", shorten(s, 64))
}

func fnNow(rt *evalState, _ []any) (any, error) { return rt.Now(), nil }

func fnParseTime(_ *evalState, args []any) (any, error) {
	s, err := argString("time", args[0])
	if err != nil {
		return nil, err
	}
	if len(args) == 1 {
		return parseTimeDefault(s)
	}
	layout, err := argString("layout", args[1])
	if err != nil {
		return nil, err
	}
	return time.Parse(layout, s)
}

func fnFormatTime(rt *evalState, args []any) (any, error) {
	t, err := argTime(args[0])
	if err != nil {
		return nil, err
	}
	layout, err := argString("layout", args[1])
	if err != nil {
		return nil, err
	}
	if len(layout) > 256 {
		return nil, fmt.Errorf("layout longer than 256 bytes")
	}
	out := t.Format(layout)
	return out, rt.grow(len(out))
}

func fnAddDuration(_ *evalState, args []any) (any, error) {
	t, err := argTime(args[0])
	if err != nil {
		return nil, err
	}
	d, err := argDuration(args[1])
	if err != nil {
		return nil, err
	}
	return t.Add(d), nil
}

func fnSince(rt *evalState, args []any) (any, error) {
	t, err := argTime(args[0])
	if err != nil {
		return nil, err
	}
	return rt.Now().Sub(t), nil
}

func fnUnix(_ *evalState, args []any) (any, error) {
	t, err := argTime(args[0])
	if err != nil {
		return nil, err
	}
	return int(t.Unix()), nil
}

func fnToJSON(rt *evalState, args []any) (any, error) {
	out, err := toJSON(args[0], MaxOutputBytes-rt.bytes)
	if err != nil {
		return nil, err
	}
	return out, rt.grow(len(out))
}

// fnShellQuote quotes a string as one word of sh: in single quotes, each
// ' written '\”.
func fnShellQuote(rt *evalState, args []any) (any, error) {
	s, err := argString("string", args[0])
	if err != nil {
		return nil, err
	}
	q := "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	return q, rt.grow(len(q))
}

func fnString(rt *evalState, args []any) (any, error) {
	var b strings.Builder
	if err := render(&b, args[0], MaxOutputBytes-rt.bytes); err != nil {
		return nil, err
	}
	return b.String(), rt.grow(b.Len())
}

func empty(v any) bool {
	if v == nil {
		return true
	}
	s, ok := v.(string)
	return ok && s == ""
}

func fnDefault(_ *evalState, args []any) (any, error) {
	if empty(args[0]) {
		return args[1], nil
	}
	return args[0], nil
}

func fnCoalesce(_ *evalState, args []any) (any, error) {
	for _, a := range args {
		if !empty(a) {
			return a, nil
		}
	}
	return nil, nil
}

func fnConcat(rt *evalState, args []any) (any, error) {
	total := 0
	for _, a := range args {
		rv := reflect.ValueOf(a)
		if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
			return nil, fmt.Errorf("cannot concat %s", jsonvalue.Kind(a))
		}
		total += rv.Len()
	}
	if err := rt.grow(16 * total); err != nil {
		return nil, err
	}
	out := make([]any, 0, total)
	for _, a := range args {
		rv := reflect.ValueOf(a)
		for i := 0; i < rv.Len(); i++ {
			out = append(out, rv.Index(i).Interface())
		}
	}
	return out, nil
}

func fnFlatten(rt *evalState, args []any) (any, error) {
	rv := reflect.ValueOf(args[0])
	if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
		return nil, fmt.Errorf("cannot flatten %s", jsonvalue.Kind(args[0]))
	}
	var out []any
	var walk func(v reflect.Value, depth int) error
	walk = func(v reflect.Value, depth int) error {
		if depth > 100 {
			return fmt.Errorf("nested deeper than 100 levels")
		}
		for i := 0; i < v.Len(); i++ {
			e := v.Index(i)
			for e.Kind() == reflect.Interface || e.Kind() == reflect.Pointer {
				if e.IsNil() {
					break
				}
				e = e.Elem()
			}
			if e.Kind() == reflect.Slice || e.Kind() == reflect.Array {
				if err := walk(e, depth+1); err != nil {
					return err
				}
				continue
			}
			if err := rt.grow(16); err != nil {
				return err
			}
			out = append(out, v.Index(i).Interface())
		}
		return nil
	}
	if err := walk(rv, 1); err != nil {
		return nil, err
	}
	if out == nil {
		out = []any{}
	}
	return out, nil
}

func fnReplace(rt *evalState, args []any) (any, error) {
	s, err := argString("string", args[0])
	if err != nil {
		return nil, err
	}
	old, err := argString("old", args[1])
	if err != nil {
		return nil, err
	}
	repl, err := argString("new", args[2])
	if err != nil {
		return nil, err
	}
	n := strings.Count(s, old)
	if old == "" {
		n = utf8.RuneCountInString(s) + 1
	}
	if err := rt.grow(len(s) + n*(len(repl)-len(old))); err != nil {
		return nil, err
	}
	return strings.ReplaceAll(s, old, repl), nil
}

func fnJoin(rt *evalState, args []any) (any, error) {
	sep := ""
	if len(args) == 2 {
		s, err := argString("separator", args[1])
		if err != nil {
			return nil, err
		}
		sep = s
	}
	rv := reflect.ValueOf(args[0])
	if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
		return nil, fmt.Errorf("want a list, got %s", jsonvalue.Kind(args[0]))
	}
	var b strings.Builder
	for i := 0; i < rv.Len(); i++ {
		if i > 0 {
			if err := rt.grow(len(sep)); err != nil {
				return nil, err
			}
			b.WriteString(sep)
		}
		n := b.Len()
		if err := render(&b, rv.Index(i).Interface(), MaxOutputBytes-rt.bytes); err != nil {
			return nil, err
		}
		if err := rt.grow(b.Len() - n); err != nil {
			return nil, err
		}
	}
	return b.String(), nil
}

func fnRepeat(rt *evalState, args []any) (any, error) {
	s, err := argString("string", args[0])
	if err != nil {
		return nil, err
	}
	n, err := argInt("count", args[1])
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, fmt.Errorf("negative count %d", n)
	}
	if len(s) > 0 && n > MaxOutputBytes/len(s) {
		return nil, fmt.Errorf("%w: builds more than %d bytes of strings", ErrTooExpensive, MaxOutputBytes)
	}
	if err := rt.grow(len(s) * n); err != nil {
		return nil, err
	}
	return strings.Repeat(s, n), nil
}

// fnFormat is fmt.Sprintf restricted to plain verbs and small widths:
// %s %v %d %f %g %e %q %x %X %t %%, flags "+-# 0", width and precision
// up to 64 (no '*').
func fnFormat(rt *evalState, args []any) (any, error) {
	f, err := argString("format", args[0])
	if err != nil {
		return nil, err
	}
	vals := args[1:]
	n := 0
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			continue
		}
		j := i + 1
		for j < len(f) && strings.IndexByte("+-# 0", f[j]) >= 0 {
			j++
		}
		for _, part := range []string{"width", "precision"} {
			if part == "precision" {
				if j >= len(f) || f[j] != '.' {
					break
				}
				j++
			}
			k := j
			for j < len(f) && f[j] >= '0' && f[j] <= '9' {
				j++
			}
			if j-k > 2 || (j > k && atoi(f[k:j]) > 64) {
				return nil, fmt.Errorf("%s in %q is larger than 64", part, shorten(f, 40))
			}
		}
		if j >= len(f) {
			return nil, fmt.Errorf("format %q ends in the middle of a verb", shorten(f, 40))
		}
		if f[j] == '%' {
			i = j
			continue
		}
		if strings.IndexByte("svdfgeqxXt", f[j]) < 0 {
			return nil, fmt.Errorf("unsupported verb %%%c (use s v d f g e q x X t)", f[j])
		}
		n++
		i = j
	}
	if n != len(vals) {
		return nil, fmt.Errorf("format %q wants %d arguments, got %d", shorten(f, 40), n, len(vals))
	}
	safe := make([]any, len(vals))
	for i, v := range vals {
		switch v.(type) {
		case string, bool, int, int64, float64, nil:
			safe[i] = v
		default:
			s, err := toJSON(v, MaxOutputBytes-rt.bytes)
			if err != nil {
				return nil, err
			}
			safe[i] = s
		}
		if s, ok := safe[i].(string); ok {
			if err := rt.grow(len(s) * 6); err != nil { // %q may escape every byte
				return nil, err
			}
		}
	}
	out := fmt.Sprintf(f, safe...)
	return out, rt.grow(len(out))
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

func fnTruncate(_ *evalState, args []any) (any, error) {
	s, err := argString("string", args[0])
	if err != nil {
		return nil, err
	}
	n, err := argInt("length", args[1])
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, fmt.Errorf("negative length %d", n)
	}
	i := 0
	for k := 0; k < n && i < len(s); k++ {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i], nil
}

func fnSlug(rt *evalState, args []any) (any, error) {
	s, err := argString("string", args[0])
	if err != nil {
		return nil, err
	}
	if err := rt.grow(len(s)); err != nil {
		return nil, err
	}
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
		} else {
			dash = true
		}
	}
	return b.String(), nil
}

func fnSHA256(_ *evalState, args []any) (any, error) {
	s, err := argString("string", args[0])
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:]), nil
}

func fnBase64Encode(rt *evalState, args []any) (any, error) {
	s, err := argString("string", args[0])
	if err != nil {
		return nil, err
	}
	if err := rt.grow(base64.StdEncoding.EncodedLen(len(s))); err != nil {
		return nil, err
	}
	return base64.StdEncoding.EncodeToString([]byte(s)), nil
}

func fnBase64Decode(rt *evalState, args []any) (any, error) {
	s, err := argString("string", args[0])
	if err != nil {
		return nil, err
	}
	if err := rt.grow(len(s)); err != nil {
		return nil, err
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		b, err = base64.RawStdEncoding.DecodeString(s)
	}
	if err != nil {
		return nil, fmt.Errorf("invalid base64")
	}
	return string(b), nil
}

func fnURLEncode(rt *evalState, args []any) (any, error) {
	s, err := argString("string", args[0])
	if err != nil {
		return nil, err
	}
	if err := rt.grow(3 * len(s)); err != nil {
		return nil, err
	}
	return url.QueryEscape(s), nil
}
