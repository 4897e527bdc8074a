package expr

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/runbook/runbook/internal/jsonvalue"
)

const maxDepth = 100

// render appends the interpolation form of v to b: nil is empty, strings
// as they are, numbers without trailing zeros, times in RFC 3339,
// durations like 1h30m0s, lists and maps as compact JSON. It fails when
// the result would pass limit bytes.
func render(b *strings.Builder, v any, limit int) error {
	start := b.Len()
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		b.WriteString(x)
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case int:
		b.WriteString(strconv.Itoa(x))
	case float64:
		b.WriteString(formatFloat(x))
	case time.Time:
		b.WriteString(x.Format(time.RFC3339Nano))
	case time.Duration:
		b.WriteString(x.String())
	case []byte:
		b.Write(x)
	default:
		w := &jsonWriter{b: b, limit: limit + start}
		w.value(v, 0)
		if w.err != nil {
			return w.err
		}
	}
	if b.Len()-start > limit {
		return fmt.Errorf("%w: value renders to more than %d bytes", ErrTooExpensive, MaxOutputBytes)
	}
	return nil
}

func formatFloat(f float64) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// toJSON renders v as compact JSON with sorted map keys.
func toJSON(v any, limit int) (string, error) {
	var b strings.Builder
	w := &jsonWriter{b: &b, limit: limit}
	w.value(v, 0)
	if w.err != nil {
		return "", w.err
	}
	return b.String(), nil
}

type jsonWriter struct {
	b     *strings.Builder
	limit int
	err   error
}

func (w *jsonWriter) over() bool {
	if w.err == nil && w.b.Len() > w.limit {
		w.err = fmt.Errorf("%w: value renders to more than %d bytes", ErrTooExpensive, MaxOutputBytes)
	}
	return w.err != nil
}

func (w *jsonWriter) value(v any, depth int) {
	if w.over() {
		return
	}
	if depth > maxDepth {
		w.err = fmt.Errorf("value nested deeper than %d levels", maxDepth)
		return
	}
	switch x := v.(type) {
	case nil:
		w.b.WriteString("null")
	case string:
		w.str(x)
	case bool:
		w.b.WriteString(strconv.FormatBool(x))
	case int:
		w.b.WriteString(strconv.Itoa(x))
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			w.err = fmt.Errorf("cannot render %v as JSON", x)
			return
		}
		w.b.WriteString(formatFloat(x))
	case time.Time:
		w.str(x.Format(time.RFC3339Nano))
	case time.Duration:
		w.str(x.String())
	case []any:
		w.b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				w.b.WriteByte(',')
			}
			w.value(e, depth+1)
			if w.err != nil {
				return
			}
		}
		w.b.WriteByte(']')
	case map[string]any:
		w.b.WriteByte('{')
		for i, k := range keys(x) {
			if i > 0 {
				w.b.WriteByte(',')
			}
			w.str(k)
			w.b.WriteByte(':')
			w.value(x[k], depth+1)
			if w.err != nil {
				return
			}
		}
		w.b.WriteByte('}')
	case *StepState, *ErrorInfo, *RunInfo:
		w.value(structMap(v), depth)
	default:
		w.reflect(reflect.ValueOf(v), depth)
	}
}

func (w *jsonWriter) reflect(rv reflect.Value, depth int) {
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			w.b.WriteString("null")
			return
		}
		w.value(rv.Elem().Interface(), depth+1)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		w.b.WriteString(strconv.FormatInt(rv.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		w.b.WriteString(strconv.FormatUint(rv.Uint(), 10))
	case reflect.Float32, reflect.Float64:
		w.value(rv.Float(), depth)
	case reflect.String:
		w.str(rv.String())
	case reflect.Bool:
		w.b.WriteString(strconv.FormatBool(rv.Bool()))
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			w.b.WriteString("null")
			return
		}
		w.b.WriteByte('[')
		for i := 0; i < rv.Len(); i++ {
			if i > 0 {
				w.b.WriteByte(',')
			}
			w.value(rv.Index(i).Interface(), depth+1)
			if w.err != nil {
				return
			}
		}
		w.b.WriteByte(']')
	case reflect.Map:
		type kv struct {
			k string
			v reflect.Value
		}
		pairs := make([]kv, 0, rv.Len())
		it := rv.MapRange()
		for it.Next() {
			pairs = append(pairs, kv{fmt.Sprint(it.Key().Interface()), it.Value()})
		}
		sort.Slice(pairs, func(i, j int) bool { return pairs[i].k < pairs[j].k })
		w.b.WriteByte('{')
		for i, p := range pairs {
			if i > 0 {
				w.b.WriteByte(',')
			}
			w.str(p.k)
			w.b.WriteByte(':')
			w.value(p.v.Interface(), depth+1)
			if w.err != nil {
				return
			}
		}
		w.b.WriteByte('}')
	default:
		data, err := json.Marshal(rv.Interface())
		if err != nil {
			w.err = fmt.Errorf("cannot render %s as JSON", jsonvalue.Kind(rv.Interface()))
			return
		}
		w.b.Write(data)
	}
}

func (w *jsonWriter) str(s string) {
	b := w.b
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b.WriteByte('\\')
				b.WriteByte(c)
			case c == '\n':
				b.WriteString(`\n`)
			case c == '\r':
				b.WriteString(`\r`)
			case c == '\t':
				b.WriteString(`\t`)
			case c < 0x20 || c == 0x7f:
				fmt.Fprintf(b, `\u%04x`, c)
			default:
				b.WriteByte(c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString(`\ufffd`)
		} else if r == '\u2028' || r == '\u2029' {
			fmt.Fprintf(b, `\u%04x`, r)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	b.WriteByte('"')
}

// structMap turns the package's structs into the maps expressions see.
func structMap(v any) any {
	switch x := v.(type) {
	case *StepState:
		if x == nil {
			return nil
		}
		return map[string]any{"outputs": x.Outputs, "status": x.Status, "error": structMap(x.Error)}
	case *ErrorInfo:
		if x == nil {
			return nil
		}
		return map[string]any{"code": x.Code, "message": x.Message, "data": x.Data, "attempt": x.Attempt}
	case *RunInfo:
		if x == nil {
			return nil
		}
		return map[string]any{"id": x.ID, "playbook": x.Playbook, "started_at": x.StartedAt, "status": x.Status}
	}
	return v
}

// normalize turns an expression result into plain data: the package's
// structs become maps, typed nils nil, maps with non-string keys
// map[string]any; lists and maps are copied. It fails when the value would
// render to more than MaxOutputBytes (shared sub-lists count each time).
func normalize(v any) (any, error) {
	budget := MaxOutputBytes
	return norm(v, &budget, 0)
}

func norm(v any, budget *int, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("value nested deeper than %d levels", maxDepth)
	}
	*budget -= 4
	if *budget < 0 {
		return nil, fmt.Errorf("%w: value is larger than %d bytes", ErrTooExpensive, MaxOutputBytes)
	}
	switch x := v.(type) {
	case nil, bool, int, float64, time.Time, time.Duration:
		return v, nil
	case string:
		*budget -= len(x)
		if *budget < 0 {
			return nil, fmt.Errorf("%w: value is larger than %d bytes", ErrTooExpensive, MaxOutputBytes)
		}
		return v, nil
	case *StepState, *ErrorInfo, *RunInfo:
		return norm(structMap(v), budget, depth)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			n, err := norm(e, budget, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case map[string]any:
		if x == nil {
			return nil, nil
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			*budget -= len(k)
			n, err := norm(e, budget, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = n
		}
		return out, nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return nil, nil
		}
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return []any{}, nil
		}
		out := make([]any, rv.Len())
		for i := range out {
			n, err := norm(rv.Index(i).Interface(), budget, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case reflect.Map:
		if rv.IsNil() {
			return nil, nil
		}
		out := make(map[string]any, rv.Len())
		it := rv.MapRange()
		for it.Next() {
			k := fmt.Sprint(it.Key().Interface())
			*budget -= len(k)
			n, err := norm(it.Value().Interface(), budget, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = n
		}
		return out, nil
	}
	return v, nil
}
