package secrets

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// naive is a reference for the matcher: every form of every registered
// value is searched for with strings.Index (fragments as every
// FragmentLen-byte window of the case-folded value and of its reversal,
// in the case-folded text), the occurrences are merged when they overlap
// and replaced by Mask.
type naive struct {
	exact []string
	wins  []string // case-folded windows
}

func newNaive(values map[string]bool) *naive {
	n := &naive{}
	for v, root := range values {
		if len(v) < MinMaskLen {
			continue
		}
		n.exact = append(n.exact, encodings(v)...)
		if !root {
			continue
		}
		n.exact = append(n.exact, programForms(v)...)
		if len(v) >= FragmentLen {
			for _, src := range []string{foldString(v), foldString(reverse(v))} {
				for i := 0; i+FragmentLen <= len(src); i++ {
					n.wins = append(n.wins, src[i:i+FragmentLen])
				}
			}
		}
	}
	return n
}

func foldString(s string) string {
	b := []byte(s)
	for i, c := range b {
		b[i] = fold[c]
	}
	return string(b)
}

func allIndex(s, p string, spans []span) []span {
	for at := 0; ; at++ {
		j := strings.Index(s[at:], p)
		if j < 0 {
			return spans
		}
		at += j
		spans = append(spans, span{at, at + len(p)})
	}
}

func (n *naive) spans(s string) []span {
	var spans []span
	for _, p := range n.exact {
		spans = allIndex(s, p, spans)
	}
	folded := foldString(s)
	for _, w := range n.wins {
		spans = allIndex(folded, w, spans)
	}
	slices.SortFunc(spans, func(a, b span) int { return a.from - b.from })
	var out []span
	for _, sp := range spans {
		if len(out) > 0 && sp.from < out[len(out)-1].to {
			out[len(out)-1].to = max(out[len(out)-1].to, sp.to)
			continue
		}
		out = append(out, sp)
	}
	return out
}

func (n *naive) String(s string) string {
	sp := n.spans(s)
	if len(sp) == 0 {
		return s
	}
	return replaceSpans(s, sp)
}

// alphabet holds letters of both cases, digits, and bytes that the lossy
// key (OR 0x20) confuses with them ('@' and '`', '[' and '{', '\x10' and
// '0'), and a multi-byte rune.
const alphabet = "abcdefgABCDEFG0123-_/+=:@`[{\x10\x11 é"

func randText(rng *rand.Rand, n int) string {
	var b strings.Builder
	for b.Len() < n {
		i := rng.IntN(len(alphabet))
		if alphabet[i] >= 0x80 {
			b.WriteString("é")
			continue
		}
		b.WriteByte(alphabet[i])
	}
	return b.String()
}

// lossySwap changes one byte of s to the byte the lossy key confuses it
// with, if it has one.
func lossySwap(rng *rand.Rand, s string) string {
	b := []byte(s)
	for range 8 {
		i := rng.IntN(len(b))
		if c := b[i]; c < 0x80 && (c&0x20 == 0) != (c >= 'A' && c <= 'Z') {
			b[i] = c ^ 0x20
			return string(b)
		}
	}
	return s
}

func randCase(rng *rand.Rand, s string) string {
	b := []byte(s)
	for i, c := range b {
		if rng.IntN(2) == 0 {
			if c >= 'a' && c <= 'z' {
				b[i] = c - 32
			} else if c >= 'A' && c <= 'Z' {
				b[i] = c + 32
			}
		}
	}
	return string(b)
}

// leak returns a form of v a program might print, or a near miss.
func leak(rng *rand.Rand, v string) string {
	switch rng.IntN(12) {
	case 0:
		return v
	case 1:
		return strings.ToUpper(v)
	case 2:
		return randCase(rng, reverse(v))
	case 3, 4:
		if len(v) < 8 {
			return v
		}
		n := 7 + rng.IntN(len(v)-6) // 7 is a near miss
		at := rng.IntN(len(v) - n + 1)
		return randCase(rng, v[at:at+n])
	case 5:
		return lossySwap(rng, v)
	case 6:
		return base64.StdEncoding.EncodeToString([]byte(v))
	case 7:
		return base64.StdEncoding.EncodeToString([]byte(randText(rng, rng.IntN(3)) + v))
	case 8:
		return hex.EncodeToString([]byte(v))
	case 9:
		ds := programForms(v)
		return ds[rng.IntN(len(ds))]
	case 10:
		return lossySwap(rng, strings.ToUpper(hex.EncodeToString([]byte(v))))
	default:
		return fmt.Sprintf("%q", v)
	}
}

// TestMatcherAgainstNaive compares String, Bytes and Contains with the
// naive reference on random text holding random forms of random secrets.
func TestMatcherAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	rounds := 300
	if testing.Short() {
		rounds = 60
	}
	for round := range rounds {
		r := NewRedactor()
		values := map[string]bool{}
		var vs []string
		for range 1 + rng.IntN(24) {
			var v string
			if rng.IntN(4) == 0 {
				v = randText(rng, 2+rng.IntN(8))
			} else {
				v = randText(rng, 8+rng.IntN(33))
			}
			root := rng.IntN(4) != 0
			if root {
				r.Add(v)
			} else {
				r.AddDerived(v)
			}
			values[v] = values[v] || root
			vs = append(vs, v)
		}
		ref := newNaive(values)
		for range 20 {
			var b strings.Builder
			for b.Len() < 300+rng.IntN(1200) {
				b.WriteString(randText(rng, rng.IntN(40)))
				if rng.IntN(3) != 0 {
					b.WriteString(leak(rng, vs[rng.IntN(len(vs))]))
				}
			}
			text := b.String()
			for _, s := range []string{text, text[:rng.IntN(len(text)+1)], text[rng.IntN(len(text)+1):]} {
				want := ref.String(s)
				if got := r.String(s); got != want {
					t.Fatalf("round %d: values %q\ntext %q\nString = %q\nnaive  = %q", round, vs, s, got, want)
				}
				if got := string(r.Bytes([]byte(s))); got != want {
					t.Fatalf("round %d: Bytes(%q) = %q, want %q", round, s, got, want)
				}
				if got := r.Contains(s); got != (want != s) {
					t.Fatalf("round %d: Contains(%q) = %v, want %v", round, s, got, !got)
				}
			}
		}
	}
}

func TestFoldWord(t *testing.T) {
	for c := range 256 {
		for pos := range 8 {
			w := uint64(0x4142435a5b40607a) &^ (0xff << (8 * pos)) // neighbours 'A', 'Z', '[', '@', '`', 'z'
			w |= uint64(c) << (8 * pos)
			var want uint64
			for j := range 8 {
				want |= uint64(fold[byte(w>>(8*j))]) << (8 * j)
			}
			if got := foldWord(w); got != want {
				t.Fatalf("foldWord(%#x) = %#x, want %#x", w, got, want)
			}
		}
	}
}
