package state_test

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
)

// TestAppendJSONWritesWhatJSONMarshalWrites: the values the store writes
// as JSON (outputs, event data, inputs) are written byte for byte as
// json.Marshal writes them, so a record reads back the same, and
// unsupported values fail as json.Marshal fails.
func TestAppendJSONWritesWhatJSONMarshalWrites(t *testing.T) {
	type named map[string]any
	cases := map[string]any{
		"shell outputs":      map[string]any{"exit_code": 0, "stdout": "", "stderr": "", "json": nil, "truncated": false, "duration_ms": int64(12)},
		"html and quotes":    map[string]any{"s": `<a href="x">&amp;</a> \ back`},
		"control characters": map[string]any{"s": "a\x00b\x01\x1f\b\f\n\r\t\x7f"},
		"invalid utf-8":      map[string]any{"s": "ok\xff\xfe\xc3(", "\xffkey": 1},
		"line separators":    map[string]any{"s": "a\u2028b\u2029c"},
		"unicode":            map[string]any{"s": "클러스터 — ✓ 𝄞"},
		"floats": []any{0.0, math.Copysign(0, -1), 1.5, -123.456, 1e-6, 9.99e-7, 1e-7, 1.5e-10, 1e20, 1e21, 1.2345e300,
			math.MaxFloat64, math.SmallestNonzeroFloat64, float64(1 << 53), 0.1 + 0.2},
		"integers":    []any{0, -1, math.MaxInt64, math.MinInt64, int64(-7), int32(42), uint64(math.MaxUint64)},
		"nested":      map[string]any{"a": map[string]any{"b": []any{map[string]any{}, []any{}, nil}}, "z": true},
		"nil map":     map[string]any{"m": map[string]any(nil), "l": []any(nil)},
		"sorted keys": map[string]any{"b": 1, "a": 2, "B": 3, "aa": 4, "": 5, "é": 6},
		"many keys":   manyKeys(40),
		"other types": map[string]any{"env": map[string]string{"I": "1"}, "argv": []string{"a", "<b>"}, "t": time.Date(2026, 11, 30, 1, 2, 3, 4, time.UTC), "n": json.Number("12.50"), "raw": json.RawMessage(`{"x":1}`)},
		"named map":   named{"x": 1},
		"struct": struct {
			A int `json:"a"`
		}{A: 1},
		"top-level string": "<tag>",
		"top-level nil":    nil,
	}
	for name, v := range cases {
		t.Run(name, func(t *testing.T) {
			want, err := json.Marshal(v)
			require.NoError(t, err)
			got, err := state.AppendJSON([]byte("prefix"), v)
			require.NoError(t, err)
			assert.Equal(t, "prefix"+string(want), string(got))
		})
	}
	t.Run("values JSON cannot hold fail as json.Marshal fails", func(t *testing.T) {
		for _, v := range []any{math.NaN(), math.Inf(1), map[string]any{"x": math.Inf(-1)}, []any{func() {}}} {
			_, want := json.Marshal(v)
			require.Error(t, want)
			_, err := state.AppendJSON(nil, v)
			assert.EqualError(t, err, want.Error())
		}
	})
	t.Run("random values", func(t *testing.T) {
		r := rand.New(rand.NewPCG(1, 2))
		for range 2000 {
			v := randomJSONValue(r, 3)
			want, err := json.Marshal(v)
			require.NoError(t, err)
			got, err := state.AppendJSON(nil, v)
			require.NoError(t, err)
			require.Equal(t, string(want), string(got))
		}
	})
}

func manyKeys(n int) map[string]any {
	m := make(map[string]any, n)
	for i := range n {
		m[strings.Repeat("k", i%5)+string(rune('a'+i%26))+string(rune('A'+i/26))] = i
	}
	return m
}

// randomJSONValue returns a value of the kinds a step's outputs hold.
func randomJSONValue(r *rand.Rand, depth int) any {
	kinds := 8
	if depth == 0 {
		kinds = 6
	}
	switch r.IntN(kinds) {
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 0
	case 2:
		return r.Int64() >> r.IntN(64)
	case 3:
		return (r.Float64() - 0.5) * math.Pow(10, float64(r.IntN(60)-30))
	case 4, 5:
		return randomJSONString(r)
	case 6:
		l := make([]any, r.IntN(4))
		for i := range l {
			l[i] = randomJSONValue(r, depth-1)
		}
		return l
	default:
		m := map[string]any{}
		for range r.IntN(20) {
			m[randomJSONString(r)] = randomJSONValue(r, depth-1)
		}
		return m
	}
}

// randomJSONString returns a string of what json.Marshal escapes and what
// it does not, now and then with a byte that is not UTF-8.
func randomJSONString(r *rand.Rand) string {
	runes := []rune("ab<>&\"\\\n\t\x01 é\u2028")
	var sb strings.Builder
	for range r.IntN(12) {
		if r.IntN(20) == 0 {
			sb.WriteByte(0xff)
			continue
		}
		sb.WriteRune(runes[r.IntN(len(runes))])
	}
	return sb.String()
}
