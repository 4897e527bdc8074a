package secrets

import (
	"cmp"
	"encoding/binary"
	"math/bits"
	"slices"
	"strings"
	"unsafe"
)

// FragmentLen is the shortest fragment of a secret (or of its reversal),
// in any ASCII letter case, that the Redactor masks in text: `cut -c1-12`
// of a secret is masked, a shared 7-byte run of ordinary text is not.
const FragmentLen = 8

// The matcher finds every occurrence of the exact patterns (a value and
// its encodings) and of the fragment windows (every FragmentLen-byte
// window of a secret and of its reversal, ASCII case folded) in one pass
// over the text. It looks at every step-th byte only: it loads the next 4
// bytes, folds them lossily (OR 0x20: letters to lower case, and a few
// other bytes with them) and tests a hash of that key in a bitset of the
// keys that occur in a pattern at offsets 0..step-1 (so a pattern starting
// anywhere has one of them at a position looked at) or anywhere in a
// fragment window. Only a hit looks the key up in an open-addressed table
// of candidates and compares exactly; a fragment window is looked up by
// its lossy 8-byte key in a second bitset and table, and its case-folded
// bytes (folded 8 at a time) are compared with each window under that key. Patterns shorter than 4+step-1 bytes (encodings of the
// shortest secrets) are searched for separately with strings.Index.
// Matches are marked as byte spans; overlapping spans merge, and each
// merged span is replaced by Mask. Consecutive windows of a longer
// fragment overlap, so a fragment of any length ≥ FragmentLen is masked
// whole.
const (
	maskBits = 17 // log2 of the prefilter's size in bits
	step     = 4
	minKeyed = 4 + step - 1 // shortest pattern found through keys
)

// snapshot is an immutable view of the registered patterns, rebuilt by Add.
type snapshot struct {
	gen   uint64
	mask  []uint64 // bitset of hashed 4-byte keys, tested first
	keys  table4   // 4-byte key -> index in cands
	cands []cand
	short []string // patterns shorter than minKeyed
	fmask []uint64 // bitset of hashed 8-byte fragment keys
	fkeys table8   // lossy 8-byte key -> refs[from:to]
	refs  []windowRef
}

// windowRef is a fragRef with its case-folded window, first byte lowest.
type windowRef struct {
	w uint64
	fragRef
}

// cand lists what a key may belong to: exact patterns holding it at an
// offset, and whether a fragment window holds it.
type cand struct {
	exact []placed
	frag  bool
}

type placed struct {
	p   string
	off int
}

// fragRef places a window in a case-folded secret (or its reversal), so a
// match extends by comparing bytes.
type fragRef struct {
	src string
	off int
}

// table4 is an open-addressed hash table from a 4-byte key (never 0: every
// byte of a lossy key has 0x20 set) to an index.
type table4 struct {
	keys  []uint32
	vals  []int32
	shift uint
}

func newTable4(n int) table4 {
	bits := uint(4)
	for 1<<bits < 2*n {
		bits++
	}
	return table4{keys: make([]uint32, 1<<bits), vals: make([]int32, 1<<bits), shift: 32 - bits}
}

// slot returns where k is, or the empty slot where it belongs.
func (t *table4) slot(k uint32) int {
	m := len(t.keys) - 1
	for i := int((k * 0x9E3779B1) >> t.shift); ; i = (i + 1) & m {
		if t.keys[i] == k || t.keys[i] == 0 {
			return i
		}
	}
}

// table8 is table4 for 8-byte keys, each giving a range of refs.
type table8 struct {
	keys     []uint64
	from, to []int32
	shift    uint
}

func newTable8(n int) table8 {
	bits := uint(4)
	for 1<<bits < 2*n {
		bits++
	}
	return table8{keys: make([]uint64, 1<<bits), from: make([]int32, 1<<bits), to: make([]int32, 1<<bits), shift: 64 - bits}
}

func (t *table8) slot(k uint64) int {
	m := len(t.keys) - 1
	for i := int((k * 0x9E3779B97F4A7C15) >> t.shift); ; i = (i + 1) & m {
		if t.keys[i] == k || t.keys[i] == 0 {
			return i
		}
	}
}

func newSnapshot(gen uint64, exact map[string]struct{}, frags map[uint64][]fragRef) *snapshot {
	s := &snapshot{gen: gen, mask: make([]uint64, 1<<maskBits/64)}
	// Gather the keys first, to size the table.
	type keyed struct {
		k uint32
		e placed
	}
	var exactKeys []keyed
	for p := range exact {
		if len(p) < minKeyed {
			s.short = append(s.short, p)
			continue
		}
		for off := range step {
			exactKeys = append(exactKeys, keyed{key4(p, off), placed{p, off}})
		}
	}
	slices.Sort(s.short)
	// Deterministic order of exact candidates.
	slices.SortFunc(exactKeys, func(a, b keyed) int {
		return cmp.Or(cmp.Compare(a.e.p, b.e.p), cmp.Compare(a.e.off, b.e.off))
	})
	// Fragment windows, regrouped by their lossy key.
	byLossy := map[uint64][]windowRef{}
	for w, refs := range frags {
		w = bits.ReverseBytes64(w)
		k := w | lossy8
		for _, r := range refs {
			byLossy[k] = append(byLossy[k], windowRef{w, r})
		}
	}
	var fragKeys []uint32
	for k := range byLossy {
		for j := range FragmentLen - 3 {
			fragKeys = append(fragKeys, uint32(k>>(8*j)))
		}
	}
	s.keys = newTable4(len(exactKeys) + len(fragKeys))
	get := func(k uint32) *cand {
		i := s.keys.slot(k)
		if s.keys.keys[i] == 0 {
			s.keys.keys[i] = k
			s.keys.vals[i] = int32(len(s.cands))
			s.cands = append(s.cands, cand{})
			h := hash4(k)
			s.mask[h/64] |= 1 << (h % 64)
		}
		return &s.cands[s.keys.vals[i]]
	}
	for _, e := range exactKeys {
		c := get(e.k)
		c.exact = append(c.exact, e.e)
	}
	for _, k := range fragKeys {
		get(k).frag = true
	}
	if len(byLossy) > 0 {
		s.fmask = make([]uint64, 1<<maskBits/64)
		s.fkeys = newTable8(len(byLossy))
	}
	for k, refs := range byLossy {
		h := hash8(k)
		s.fmask[h/64] |= 1 << (h % 64)
		i := s.fkeys.slot(k)
		s.fkeys.keys[i] = k
		s.fkeys.from[i] = int32(len(s.refs))
		s.refs = append(s.refs, refs...)
		s.fkeys.to[i] = int32(len(s.refs))
	}
	return s
}

const lossy8 = 0x2020202020202020

// key4 is the lossy case-folded key of s[i:i+4] (OR 0x20: letters to lower
// case, and a few other bytes with them), first byte lowest.
func key4(s string, i int) uint32 {
	return binary.LittleEndian.Uint32(unsafe.Slice(unsafe.StringData(s[i:i+4]), 4)) | 0x20202020
}

// load8 is s[i:i+8], first byte lowest; OR lossy8 makes its lossy key.
func load8(s string, i int) uint64 {
	return binary.LittleEndian.Uint64(unsafe.Slice(unsafe.StringData(s[i:i+8]), 8))
}

func hash4(k uint32) uint32 { return (k * 0x9E3779B1) >> (32 - maskBits) }
func hash8(w uint64) uint64 { return (w * 0x9E3779B97F4A7C15) >> (64 - maskBits) }

// fold maps ASCII upper-case letters to lower case, other bytes to themselves.
var fold = func() (t [256]byte) {
	for i := range t {
		t[i] = byte(i)
		if i >= 'A' && i <= 'Z' {
			t[i] = byte(i) + 'a' - 'A'
		}
	}
	return t
}()

// addWindows adds every case-folded FragmentLen-byte window of v.
func addWindows(m map[uint64][]fragRef, v string) {
	folded := make([]byte, len(v))
	for i := range len(v) {
		folded[i] = fold[v[i]]
	}
	src := string(folded)
	for i := 0; i+FragmentLen <= len(v); i++ {
		w := window(v, i)
		refs := m[w]
		m[w] = append(refs[:len(refs):len(refs)], fragRef{src, i}) // never append to a slice an older snapshot holds
	}
}

// window is the case-folded s[i:i+8], first byte highest.
func window(s string, i int) uint64 {
	var w uint64
	for _, c := range []byte(s[i : i+FragmentLen]) {
		w = w<<8 | uint64(fold[c])
	}
	return w
}

type span struct{ from, to int }

// extend returns the longest run of s around the window at (which matched
// r) that equals, case folded, the secret of r at the same alignment.
func extend(s string, at int, r fragRef) (from, to int) {
	from, to = at, at+FragmentLen
	for j := r.off - 1; from > 0 && j >= 0 && fold[s[from-1]] == r.src[j]; j-- {
		from--
	}
	for j := r.off + FragmentLen; to < len(s) && j < len(r.src) && fold[s[to]] == r.src[j]; j++ {
		to++
	}
	return from, to
}

// scan appends to spans those of s to mask, sorted and merged; with first
// it stops at the first match.
func (m *snapshot) scan(s string, first bool, spans []span) []span {
	for _, p := range m.short {
		for at := 0; ; {
			j := strings.Index(s[at:], p)
			if j < 0 {
				break
			}
			spans = append(spans, span{at + j, at + j + len(p)})
			if first {
				return spans
			}
			at += j + 1
		}
	}
	mask, fmask := m.mask, m.fmask
	fragDone := -1
	for i := 0; i+4 <= len(s); i += step {
		k := key4(s, i)
		h := hash4(k)
		if mask[h/64]&(1<<(h%64)) == 0 {
			continue
		}
		slot := m.keys.slot(k)
		if m.keys.keys[slot] == 0 {
			continue
		}
		c := &m.cands[m.keys.vals[slot]]
		n := len(spans)
		for _, e := range c.exact {
			if at := i - e.off; at >= 0 && strings.HasPrefix(s[at:], e.p) {
				spans = append(spans, span{at, at + len(e.p)})
			}
		}
		if c.frag {
			for at := max(i-step+1, fragDone+1, 0); at <= i && at+FragmentLen <= len(s); at++ {
				raw := load8(s, at)
				w := raw | lossy8
				if h := hash8(w); fmask[h/64]&(1<<(h%64)) == 0 {
					continue
				}
				fs := m.fkeys.slot(w)
				if m.fkeys.keys[fs] == 0 {
					continue
				}
				from, to := at, -1
				fw := foldWord(raw)
				for _, r := range m.refs[m.fkeys.from[fs]:m.fkeys.to[fs]] {
					if r.w != fw {
						continue // the lossy key matched, the window does not
					}
					a, b := extend(s, at, r.fragRef)
					from, to = min(from, a), max(to, b)
				}
				if to < 0 {
					continue
				}
				spans = append(spans, span{from, to})
				fragDone = to - FragmentLen // windows inside [from, to) are covered
			}
		}
		if first && len(spans) > n {
			return spans
		}
	}
	if len(spans) < 2 {
		return spans
	}
	slices.SortFunc(spans, func(a, b span) int { return a.from - b.from })
	out := spans[:1]
	for _, sp := range spans[1:] {
		last := &out[len(out)-1]
		if sp.from < last.to {
			last.to = max(last.to, sp.to)
			continue
		}
		out = append(out, sp)
	}
	return out
}

// foldWord maps the ASCII upper-case letters among the 8 bytes of w to
// lower case, like fold, leaving other bytes as they are.
func foldWord(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	x := w &^ highs                // each byte below 0x80: no carries below
	ge := x + (0x80-'A')*ones      // high bit set: byte ≥ 'A'
	gt := x + (0x80-'Z'-1)*ones    // high bit set: byte > 'Z'
	upper := ge &^ gt &^ w & highs // 'A' ≤ byte ≤ 'Z' and below 0x80
	return w | upper>>2
}

// replaceSpans returns s with each span replaced by Mask.
func replaceSpans(s string, spans []span) string {
	var b strings.Builder
	n := len(s)
	for _, sp := range spans {
		n += len(Mask) - (sp.to - sp.from)
	}
	b.Grow(max(n, 0))
	at := 0
	for _, sp := range spans {
		b.WriteString(s[at:sp.from])
		b.WriteString(Mask)
		at = sp.to
	}
	b.WriteString(s[at:])
	return b.String()
}
