package secrets

import (
	"bytes"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
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
	"unsafe"
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
	values map[string]bool // value -> registered with Add (a root secret), not only AddDerived
	exact  map[string]struct{}
	frags  map[uint64][]fragRef
	snap   atomic.Pointer[snapshot] // nil until a maskable value is added
}

// NewRedactor returns a Redactor with nothing registered.
func NewRedactor() *Redactor {
	return &Redactor{}
}

// Add registers secret values. Empty values are ignored; values shorter
// than MinMaskLen are kept but not masked. Besides each value itself, the
// Redactor masks its base64 (standard and URL alphabets, padded or not,
// and as a fragment of a longer encoding), URL query and path escaping,
// JSON string escaping and hex (lower and upper case); and, for text no
// expression produced, the forms a program commonly turns it into: the
// value in any ASCII letter case, reversed, its SHA-1, SHA-256 and MD5
// digests (hex and base64, with or without a trailing newline hashed),
// and any fragment of FragmentLen bytes or more of it or of its reversal,
// in any letter case.
func (r *Redactor) Add(values ...string) { r.add(true, values) }

// AddDerived registers values computed from secrets (an expression's
// result): they are masked with their encodings, like Add, but without the
// letter-case, reversal, digest and fragment forms, which would mask
// ordinary text around a secret that the value quotes.
func (r *Redactor) AddDerived(values ...string) { r.add(false, values) }

func (r *Redactor) add(root bool, values []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.values == nil {
		r.values = map[string]bool{}
	}
	var fresh []string
	var roots []bool
	for _, v := range values {
		if v == "" {
			continue
		}
		if was, ok := r.values[v]; ok && (was || !root) {
			continue
		}
		r.values[v] = root
		if len(v) >= MinMaskLen {
			fresh = append(fresh, v)
			roots = append(roots, root)
		}
	}
	if len(fresh) == 0 {
		return
	}
	// Copy on write: readers keep the snapshot they loaded.
	exact := make(map[string]struct{}, len(r.exact)+16*len(fresh))
	for p := range r.exact {
		exact[p] = struct{}{}
	}
	frags, copied := r.frags, false
	for i, v := range fresh {
		for _, p := range encodings(v) {
			exact[p] = struct{}{}
		}
		if !roots[i] {
			continue
		}
		for _, p := range programForms(v) {
			exact[p] = struct{}{}
		}
		if len(v) >= FragmentLen {
			if !copied {
				frags, copied = make(map[uint64][]fragRef, len(r.frags)+2*len(v)), true
				for k, refs := range r.frags {
					frags[k] = refs
				}
			}
			addWindows(frags, v)
			addWindows(frags, reverse(v))
		}
	}
	r.exact, r.frags = exact, frags
	var gen uint64 = 1
	if old := r.snap.Load(); old != nil {
		gen = old.gen + 1
	}
	r.snap.Store(newSnapshot(gen, exact, frags))
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

// programForms returns the exact forms a program commonly turns a secret
// into (beyond what the fragment windows catch): its digests, and for a
// value too short for windows, its letter cases and reversal.
func programForms(v string) []string {
	var out []string
	for _, in := range []string{v, v + "\n"} {
		for _, sum := range [][]byte{sha1Sum(in), sha256Sum(in), md5Sum(in)} {
			h := hex.EncodeToString(sum)
			out = append(out, h, strings.ToUpper(h), base64.StdEncoding.EncodeToString(sum), base64.RawStdEncoding.EncodeToString(sum))
		}
	}
	if len(v) < FragmentLen {
		rv := reverse(v)
		out = append(out, strings.ToLower(v), strings.ToUpper(v), rv, strings.ToLower(rv), strings.ToUpper(rv))
	}
	return out
}

func sha1Sum(s string) []byte   { h := sha1.Sum([]byte(s)); return h[:] }
func sha256Sum(s string) []byte { h := sha256.Sum256([]byte(s)); return h[:] }
func md5Sum(s string) []byte    { h := md5.Sum([]byte(s)); return h[:] }

// reverse reverses s rune by rune, as rev(1) does.
func reverse(s string) string {
	rs := []rune(s)
	slices.Reverse(rs)
	return string(rs)
}

// String returns s with every registered value and encoding masked.
func (r *Redactor) String(s string) string {
	snap := r.load()
	if snap == nil || s == "" {
		return s
	}
	var buf [8]span
	spans := snap.scan(s, false, buf[:0])
	if len(spans) == 0 {
		return s
	}
	return replaceSpans(s, spans)
}

// Bytes returns b with every registered value and encoding masked. It
// returns b itself when nothing is masked.
func (r *Redactor) Bytes(b []byte) []byte {
	snap := r.load()
	if snap == nil || len(b) == 0 {
		return b
	}
	s := unsafe.String(unsafe.SliceData(b), len(b)) // read only, not kept
	var buf [8]span
	spans := snap.scan(s, false, buf[:0])
	if len(spans) == 0 {
		return b
	}
	return []byte(replaceSpans(s, spans))
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
	var buf [1]span
	return str != "" && len(s.scan(str, true, buf[:0])) > 0
}

func (s *snapshot) containsBytes(b []byte) bool {
	return s.contains(unsafe.String(unsafe.SliceData(b), len(b)))
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
