package secrets

import (
	"slices"
	"strings"
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
// fragment window. Only a hit looks up the candidates and compares
// exactly. Patterns shorter than 4+step-1 bytes (encodings of the
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
	cands map[uint32]*cand // by lossy key of 4 bytes
	mask  []uint64
	short []string             // patterns shorter than minKeyed
	frags map[uint64][]fragRef // case-folded 8-byte windows
	fmask []uint64             // bitset of hashed frags, tested before the map
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

func newSnapshot(gen uint64, exact map[string]struct{}, frags map[uint64][]fragRef) *snapshot {
	s := &snapshot{gen: gen, cands: map[uint32]*cand{}, mask: make([]uint64, 1<<maskBits/64), frags: frags}
	get := func(k uint32) *cand {
		c := s.cands[k]
		if c == nil {
			c = &cand{}
			s.cands[k] = c
			h := hash4(k)
			s.mask[h/64] |= 1 << (h % 64)
		}
		return c
	}
	for p := range exact {
		if len(p) < minKeyed {
			s.short = append(s.short, p)
			continue
		}
		for off := range step {
			c := get(key4(p, off))
			c.exact = append(c.exact, placed{p, off})
		}
	}
	slices.Sort(s.short)
	if len(frags) > 0 {
		s.fmask = make([]uint64, 1<<maskBits/64)
	}
	for w := range frags {
		h := hash8(w)
		s.fmask[h/64] |= 1 << (h % 64)
		for j := range FragmentLen - 3 {
			get(uint32(w>>(8*(FragmentLen-4-j))) | 0x20202020).frag = true
		}
	}
	return s
}

// key4 is the lossy case-folded key of s[i:i+4], first byte highest.
func key4(s string, i int) uint32 {
	return (uint32(s[i])<<24 | uint32(s[i+1])<<16 | uint32(s[i+2])<<8 | uint32(s[i+3])) | 0x20202020
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

// scan returns the spans of s to mask, sorted and merged; with first it
// stops at the first match.
func (m *snapshot) scan(s string, first bool) []span {
	var spans []span
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
	mask := m.mask
	fragDone := -1
	for i := 0; i+4 <= len(s); i += step {
		k := key4(s, i)
		h := hash4(k)
		if mask[h/64]&(1<<(h%64)) == 0 {
			continue
		}
		c := m.cands[k]
		if c == nil {
			continue
		}
		n := len(spans)
		for _, e := range c.exact {
			if at := i - e.off; at >= 0 && strings.HasPrefix(s[at:], e.p) {
				spans = append(spans, span{at, at + len(e.p)})
			}
		}
		if c.frag {
			for at := max(i-step+1, 0); at <= i && at+FragmentLen <= len(s); at++ {
				if at <= fragDone {
					continue
				}
				w := window(s, at)
				if h := hash8(w); m.fmask[h/64]&(1<<(h%64)) == 0 {
					continue
				}
				refs, ok := m.frags[w]
				if !ok {
					continue
				}
				from, to := at, at+FragmentLen
				for _, r := range refs {
					a, b := extend(s, at, r)
					from, to = min(from, a), max(to, b)
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
