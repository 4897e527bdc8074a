package secrets

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Mask replaces every secret occurrence.
const Mask = "***"

// MinMaskLen is the shortest value the Redactor masks. Shorter values are
// accepted by Add but never masked: masking "a" or "42" everywhere would
// destroy the output and reveal more than it hides.
const MinMaskLen = 3

// minEncodedLen is the shortest fragment of a value's base64 encoding at an
// arbitrary offset that is masked.
const minEncodedLen = 4

// Redactor masks registered secret values, and their common encodings, in
// strings, bytes, JSON-like values and log records. It is safe for
// concurrent use; with nothing registered every method returns its input
// without allocating.
type Redactor struct {
	mu     sync.Mutex
	values map[string]struct{}
	snap   atomic.Pointer[snapshot] // nil until a maskable value is added
}

// snapshot is an immutable view of the registered values, rebuilt by Add.
type snapshot struct {
	gen      uint64
	patterns []string // longest first
	replacer *strings.Replacer
}

// NewRedactor returns a Redactor with nothing registered.
func NewRedactor() *Redactor {
	return &Redactor{values: map[string]struct{}{}}
}

// Add registers secret values. Empty values are ignored; values shorter
// than MinMaskLen are kept but not masked. Besides each value itself, the
// Redactor masks its base64 (standard and URL alphabets, padded or not,
// and as a fragment of a longer encoding), URL query and path escaping,
// JSON string escaping and hex (lower and upper case).
func (r *Redactor) Add(values ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.values == nil {
		r.values = map[string]struct{}{}
	}
	changed := false
	for _, v := range values {
		if v == "" {
			continue
		}
		if _, ok := r.values[v]; ok {
			continue
		}
		r.values[v] = struct{}{}
		changed = changed || len(v) >= MinMaskLen
	}
	if !changed {
		return
	}
	set := map[string]struct{}{}
	for v := range r.values {
		if len(v) < MinMaskLen {
			continue
		}
		for _, p := range encodings(v) {
			set[p] = struct{}{}
		}
	}
	patterns := make([]string, 0, len(set))
	for p := range set {
		patterns = append(patterns, p)
	}
	// Longest first, so that at any position the longest pattern wins
	// (strings.Replacer tries patterns in argument order).
	slices.SortFunc(patterns, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	args := make([]string, 0, 2*len(patterns))
	for _, p := range patterns {
		args = append(args, p, Mask)
	}
	var gen uint64 = 1
	if old := r.snap.Load(); old != nil {
		gen = old.gen + 1
	}
	r.snap.Store(&snapshot{gen: gen, patterns: patterns, replacer: strings.NewReplacer(args...)})
}

// encodings returns v and the forms it commonly takes in output.
func encodings(v string) []string {
	out := []string{v}
	add := func(s string) {
		if len(s) >= MinMaskLen {
			out = append(out, s)
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		add(enc.EncodeToString([]byte(v)))
	}
	// v inside a longer base64 text ("user:" + v in basic auth): its
	// encoding depends on its offset modulo 3. Keep the characters made
	// only of v's bits.
	for k := range 3 {
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			full := enc.EncodeToString(append(make([]byte, k), v...))
			from, to := (4*k+2)/3, 8*(k+len(v))/6
			if to-from >= minEncodedLen {
				add(full[from:to])
			}
		}
	}
	add(url.QueryEscape(v))
	add(url.PathEscape(v))
	if q, err := json.Marshal(v); err == nil {
		add(string(q[1 : len(q)-1]))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) == nil {
		q := bytes.TrimSpace(buf.Bytes())
		add(string(q[1 : len(q)-1]))
	}
	add(strconv.Quote(v)[1 : len(strconv.Quote(v))-1])
	add(hex.EncodeToString([]byte(v)))
	add(strings.ToUpper(hex.EncodeToString([]byte(v))))
	return out
}

// String returns s with every registered value and encoding masked.
func (r *Redactor) String(s string) string {
	snap := r.load()
	if snap == nil || s == "" {
		return s
	}
	out := snap.replacer.Replace(s)
	if out == s {
		return s
	}
	return out
}

// Bytes returns b with every registered value and encoding masked. It
// returns b itself when nothing is masked.
func (r *Redactor) Bytes(b []byte) []byte {
	snap := r.load()
	if snap == nil || len(b) == 0 || !snap.containsBytes(b) {
		return b
	}
	return []byte(snap.replacer.Replace(string(b)))
}

// Contains reports whether s holds a registered value or an encoding of
// one (that String would mask).
func (r *Redactor) Contains(s string) bool {
	snap := r.load()
	return snap != nil && snap.contains(s)
}

func (r *Redactor) load() *snapshot {
	if r == nil {
		return nil
	}
	return r.snap.Load()
}

// generation changes whenever the set of masked patterns does.
func (r *Redactor) generation() uint64 {
	if snap := r.load(); snap != nil {
		return snap.gen
	}
	return 0
}

func (s *snapshot) contains(str string) bool {
	for _, p := range s.patterns {
		if strings.Contains(str, p) {
			return true
		}
	}
	return false
}

func (s *snapshot) containsBytes(b []byte) bool {
	for _, p := range s.patterns {
		if bytes.Contains(b, []byte(p)) {
			return true
		}
	}
	return false
}

// Value returns a deep copy of v with every string and map key redacted.
// It handles the JSON-like types (map[string]any, []any, string, numbers,
// bools, nil) and map[string]string, []string, []byte and
// json.RawMessage. Any other value is returned as is when its JSON and
// fmt forms hold no secret, else as its redacted JSON form decoded into
// JSON-like values. With nothing registered v is returned as is.
func (r *Redactor) Value(v any) any {
	snap := r.load()
	if snap == nil {
		return v
	}
	return r.value(snap, v)
}

func (r *Redactor) value(snap *snapshot, v any) any {
	switch v := v.(type) {
	case nil, bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64, json.Number:
		return v
	case string:
		return r.String(v)
	case []byte:
		return slices.Clone(r.Bytes(v))
	case json.RawMessage:
		return json.RawMessage(slices.Clone(r.Bytes(v)))
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[uniqueKey(out, r.String(k))] = r.value(snap, e)
		}
		return out
	case map[string]string:
		out := make(map[string]string, len(v))
		for k, e := range v {
			k = r.String(k)
			for _, taken := out[k]; taken; _, taken = out[k] {
				k += "'"
			}
			out[k] = r.String(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = r.value(snap, e)
		}
		return out
	case []string:
		out := make([]string, len(v))
		for i, e := range v {
			out[i] = r.String(e)
		}
		return out
	case []map[string]any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = r.value(snap, e)
		}
		return out
	default:
		data, err := json.Marshal(v)
		if err != nil {
			s := fmt.Sprint(v)
			if snap.contains(s) {
				return r.String(s)
			}
			return v
		}
		if !snap.containsBytes(data) && !snap.contains(fmt.Sprint(v)) {
			return v
		}
		var generic any
		if err := json.Unmarshal(r.Bytes(data), &generic); err != nil {
			return r.String(fmt.Sprint(v))
		}
		return r.value(snap, generic)
	}
}

// uniqueKey returns k, or k with primes appended when two keys redact to
// the same text, so no entry is lost.
func uniqueKey(m map[string]any, k string) string {
	for _, taken := m[k]; taken; _, taken = m[k] {
		k += "'"
	}
	return k
}
