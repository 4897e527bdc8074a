package state

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// AppendJSON appends v's JSON to b, byte for byte what json.Marshal
// writes (the stores write records with it). The values a step's outputs and an event's data hold (maps of
// strings, numbers, booleans, lists and maps of them) are written here
// directly; json.Marshal goes through reflect and allocates for every
// entry of a map, which was most of what the engine allocated to record
// a step. Any other value (a struct, a named map type, a float JSON
// cannot hold) is appended as json.Marshal writes it, with its error.
func AppendJSON(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return AppendJSONString(b, x), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case int32:
		return strconv.AppendInt(b, int64(x), 10), nil
	case uint64:
		return strconv.AppendUint(b, x, 10), nil
	case float64:
		if !math.IsInf(x, 0) && !math.IsNaN(x) {
			return appendJSONFloat(b, x), nil
		}
	case map[string]any:
		return appendJSONMap(b, x)
	case []any:
		if x == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = AppendJSON(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, data...), nil
}

// appendJSONMap appends m's JSON: its keys sorted, as json.Marshal sorts
// them.
func appendJSONMap(b []byte, m map[string]any) ([]byte, error) {
	if m == nil {
		return append(b, "null"...), nil
	}
	type entry struct {
		k string
		v any
	}
	var buf [16]entry
	entries := buf[:0]
	for k, v := range m {
		entries = append(entries, entry{k, v})
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.k, b.k) })
	b = append(b, '{')
	for i, e := range entries {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendJSONString(b, e.k)
		b = append(b, ':')
		var err error
		if b, err = AppendJSON(b, e.v); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendJSONFloat appends a finite f as json.Marshal writes a float64:
// the shortest representation, in exponent form below 1e-6 and from 1e21
// on, with a one-digit negative exponent written so (1e-7, not 1e-07).
func appendJSONFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// AppendJSONString appends s quoted as json.Marshal quotes a string: with
// <, > and & escaped for HTML, control characters as \u00XX (but \b, \f,
// \n, \r and \t), invalid UTF-8 as \ufffd, and U+2028 and U+2029 escaped.
func AppendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
