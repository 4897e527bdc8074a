package expr

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFunctions(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want any
	}{
		{"now() reads the scope clock", `now()`, clock},
		{"duration parses Go durations", `duration("1h30m")`, 90 * time.Minute},
		{"parseTime reads RFC 3339", `parseTime("2026-01-02T03:04:05Z")`, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
		{"parseTime takes a layout", `parseTime("02/01/2026", "02/01/2006")`, time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)},
		{"formatTime formats with a layout", `formatTime(now(), "2006-01-02")`, "2026-03-14"},
		{"addDuration adds a duration string", `addDuration(now(), "1h")`, clock.Add(time.Hour)},
		{"since measures from the scope clock", `since(addDuration(now(), "-2m"))`, 2 * time.Minute},
		{"unix gives seconds", `unix(parseTime("1970-01-01T00:01:00Z"))`, 60},
		{"toJSON is compact with sorted keys", `toJSON({"b": [1, 2.5], "a": "<x>"})`, `{"a":"<x>","b":[1,2.5]}`},
		{"fromJSON parses", `fromJSON("{\"a\": [1]}").a[0]`, 1.0},
		{"semverCompare orders versions", `[semverCompare("v1.2.3", "1.10.0"), semverCompare("1.2.3", "1.2.3"), semverCompare("2.0.0", "1.9.9")]`, []any{-1, 0, 1}},
		{"semverCompare puts a prerelease first", `semverCompare("1.0.0-rc.1", "1.0.0")`, -1},
		{"semverCompare orders prereleases per semver.org", `[semverCompare("1.0.0-alpha", "1.0.0-alpha.1"), semverCompare("1.0.0-alpha.beta", "1.0.0-beta"), semverCompare("1.0.0-beta.2", "1.0.0-beta.11"), semverCompare("1.0.0-rc.1", "1.0.0-beta.11"), semverCompare("1.0.0-1", "1.0.0-alpha")]`, []any{-1, -1, -1, 1, -1}},
		{"semverSatisfies handles >= and < with a comma", `semverSatisfies("1.5.0", ">=1.2.3, <2")`, true},
		{"semverSatisfies handles spaces as AND", `semverSatisfies("2.0.0", ">= 1.2.3 <2")`, false},
		{"semverSatisfies handles tilde", `[semverSatisfies("1.2.9", "~1.2"), semverSatisfies("1.3.0", "~1.2")]`, []any{true, false}},
		{"semverSatisfies handles caret", `[semverSatisfies("1.9.0", "^1.2.3"), semverSatisfies("2.0.0", "^1.2.3"), semverSatisfies("0.2.9", "^0.2.3"), semverSatisfies("0.3.0", "^0.2.3")]`, []any{true, false, true, false}},
		{"semverSatisfies handles alternatives", `semverSatisfies("v3.1.0", "^1 || ^3")`, true},
		{"cidrContains takes an address", `cidrContains("10.0.0.0/8", "10.1.2.3")`, true},
		{"cidrContains takes a network", `[cidrContains("10.0.0.0/8", "10.1.0.0/16"), cidrContains("10.1.0.0/16", "10.0.0.0/8")]`, []any{true, false}},
		{"cidrOverlaps compares networks", `[cidrOverlaps("10.0.0.0/16", "10.0.255.0/24"), cidrOverlaps("10.0.0.0/24", "10.0.1.0/24")]`, []any{true, false}},
		{"cidrPrefix is the prefix length", `cidrPrefix("192.168.0.0/20")`, 20},
		{"cidrHost counts from the network address", `[cidrHost("10.0.0.0/24", 5), cidrHost("10.0.0.0/24", -1), cidrHost("fd00::/64", 1)]`, []any{"10.0.0.5", "10.0.0.255", "fd00::1"}},
		{"lower, upper and trim are expr builtins", `[lower("AB"), upper("ab"), trim("  x ")]`, []any{"ab", "AB", "x"}},
		{"replace replaces every occurrence", `replace("a-b-c", "-", "+")`, "a+b+c"},
		{"join renders non-strings", `join([1, "a", true], ",")`, "1,a,true"},
		{"split splits", `split("a,b", ",")`, []any{"a", "b"}},
		{"format is Sprintf", `format("%s=%d (%.1f)", "n", 3, 2.25)`, "n=3 (2.2)"},
		{"format renders lists as JSON", `format("%s", [1])`, "[1]"},
		{"default replaces nil and empty", `[default(nil, "d"), default("", "d"), default("v", "d"), default(0, 1)]`, []any{"d", "d", "v", 0}},
		{"coalesce takes the first non-empty", `coalesce(nil, "", "x", "y")`, "x"},
		{"truncate counts runes", `truncate("héllo", 2)`, "hé"},
		{"slug makes a DNS-safe name", `slug("  Hello, World! 2026 ")`, "hello-world-2026"},
		{"sha256 is hex", `sha256("abc")`, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{"base64 round-trips", `base64Decode(base64Encode("héllo"))`, "héllo"},
		{"urlEncode escapes a query value", `urlEncode("a b&c")`, "a+b%26c"},
		{"string renders like interpolation", `string(nil) + string(2.0) + string([1])`, "2[1]"},
		{"concat joins lists", `concat([1], [2, 3])`, []any{1, 2, 3}},
		{"flatten flattens", `flatten([1, [2, [3]]])`, []any{1, 2, 3}},
		{"repeat repeats", `repeat("ab", 3)`, "ababab"},
		{"keys is still available", `sort(keys({"b": 1, "a": 2}))`, []any{"a", "b"}},
		{"a closure of a thousand iterations runs", `reduce(1..1000, #acc + #, 0)`, 500500},
		{"formatTime takes a layout of 256 bytes", `len(formatTime(now(), repeat("x", 256)))`, 256},
		{"a dynamic regular expression of 16 KiB is accepted", `"a" matches repeat("a", 16384)`, false},
		{"replace removes every occurrence", `replace("a-b-c", "-", "")`, "abc"},
		{"replace of an empty string inserts between runes", `replace("hé", "", "-")`, "-h-é-"},
		{"flatten takes a list nested 100 levels", `flatten(reduce(1..99, [#acc], [1]))`, []any{1}},
		{"concat of a quarter million elements fits the budget", `len(concat(1..200000, 1..50000))`, 250000},
		{"reverse of 200000 elements fits the budget", `len(reverse(1..200000))`, 200000},
		{"split into 200001 strings fits the budget", `len(split(repeat(",", 200000), ","))`, 200001},
		{"join counts each element once against the budget", `len(join(split(repeat("x", 3000), ""), ""))`, 3000},
		{"repeat zero times is empty", `repeat("ab", 0)`, ""},
		{"truncate to zero runes is empty", `truncate("héllo", 0)`, ""},
		{"truncate keeps a string shorter than the length", `truncate("ab", 5)`, "ab"},
		{"repeat of an empty string is empty", `repeat("", 3)`, ""},
		{"repeat may build exactly the byte budget", `len(repeat("ab", 2097152))`, 4194304},
		{"format takes flags", `format("%+d|%-4d|%05.1f|%#x|% d", 5, 7, 2.25, 255, 3)`, "+5|7   |002.2|0xff| 3"},
		{"format takes a two-digit width", `format("%10d", 5)`, "         5"},
		{"format takes a width of 9", `format("%9d", 1)`, "        1"},
		{"format takes a width and a precision of 64", `len(format("%64.64f", 1.0))`, 66},
		{"format writes a literal percent", `format("100%%")`, "100%"},
		{"base64Decode takes padded input", `base64Decode("aGk=")`, "hi"},
		{"base64Decode takes unpadded input", `base64Decode("aGk")`, "hi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Compile(tt.src, testEnv())
			require.NoError(t, err)
			got, err := p.Eval(testScope())
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestFunctionErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"a bad version is an error", `semverCompare("1.2", "1.2.3")`, `semverCompare: invalid version "1.2"`},
		{"a bad CIDR is an error", `cidrPrefix("10.0.0.0")`, `cidrPrefix: invalid CIDR "10.0.0.0"`},
		{"a host outside the network is an error", `cidrHost("10.0.0.0/30", 4)`, "outside 10.0.0.0/30"},
		{"format refuses a star width", `format("%*d", 5, 1)`, "unsupported verb %*"},
		{"format refuses a huge width", `format("%999999d", 1)`, "width"},
		{"format counts arguments", `format("%s %s", "a")`, "wants 2 arguments, got 1"},
		{"a wrong argument type is named", `sha256(1)`, "sha256: string must be a string, got integer"},
		{"toJSON refuses NaN", `toJSON(0.0 / 0.0)`, "cannot render NaN as JSON"},
		{"flatten refuses a list nested 101 levels, as toJSON does", `flatten(reduce(1..100, [#acc], [1]))`, "flatten: nested deeper than 100 levels"},
		{"toJSON refuses a list nested 101 levels", `toJSON(reduce(1..100, [#acc], [1]))`, "toJSON: value nested deeper than 100 levels"},
		{"concat refuses a value that is not a list", `concat([1], 2)`, "concat: cannot concat integer"},
		{"flatten refuses a value that is not a list", `flatten(1)`, "flatten: cannot flatten integer"},
		{"formatTime refuses a layout over 256 bytes", `formatTime(now(), repeat("x", 257))`, "formatTime: layout longer than 256 bytes"},
		{"join refuses a value that is not a list", `join(1)`, "join: want a list, got integer"},
		{"format refuses a width over 64", `format("%65d", 1)`, `format: width in "%65d" is larger than 64`},
		{"format refuses a precision over 64", `format("%.65f", 1.0)`, `format: precision in "%.65f" is larger than 64`},
		{"format refuses a verb cut after its flags", `format("%-")`, `format: format "%-" ends in the middle of a verb`},
		{"format refuses a verb cut after its width", `format("%5")`, `format: format "%5" ends in the middle of a verb`},
		{"format refuses a verb cut after its precision", `format("%5.2")`, `format: format "%5.2" ends in the middle of a verb`},
		{"base64Decode refuses what is not base64", `base64Decode("a?")`, "base64Decode: invalid base64"},
		{"repeat refuses a negative count", `repeat("a", -1)`, "repeat: negative count -1"},
		{"truncate refuses a negative length", `truncate("a", -1)`, "truncate: negative length -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Compile(tt.src, testEnv())
			require.NoError(t, err)
			_, err = p.Eval(testScope())
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

func TestBounds(t *testing.T) {
	compileRefused := []struct {
		name, src, want string
	}{
		{"nested closures over big literal ranges are refused at compile time", `reduce(1..100000, reduce(1..100000, #acc + 1, 0), 0)`, "expression too expensive: about 1e+10 closure iterations"},
		{"a too long expression is refused", strings.Repeat("1 + ", 1100) + "1", "expression too expensive: expression is"},
		{"too many nodes are refused", strings.Repeat("1+", 1100) + "1", "expression too expensive: more than 1000 syntax nodes"},
		{"a source of the longest template length is refused as an expression", strings.Repeat(" ", MaxTemplateLen-1) + "1", "expression too expensive: expression is 65536 bytes (limit 4096)"},
		{"a source longer than a template is refused at once", strings.Repeat(" ", MaxTemplateLen) + "1", "expression too expensive: source is 65537 bytes (limit 65536)"},
	}
	for _, tt := range compileRefused {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			_, err := Compile(tt.src, nil)
			assert.ErrorContains(t, err, tt.want)
			assert.ErrorIs(t, err, ErrTooExpensive)
			assert.Less(t, time.Since(start), 500*time.Millisecond)
		})
	}
	t.Run("a template of the longest length is accepted", func(t *testing.T) {
		v, err := CompileTemplate(strings.Repeat("x", MaxTemplateLen), nil)
		require.NoError(t, err)
		assert.True(t, v.Literal())
	})
	t.Run("a too long template is refused", func(t *testing.T) {
		_, err := CompileTemplate(strings.Repeat("x", MaxTemplateLen+1), nil)
		assert.ErrorContains(t, err, "expression too expensive: template is 65537 bytes (limit 65536)")
		assert.ErrorIs(t, err, ErrTooExpensive)
	})
	t.Run("the most parts are accepted", func(t *testing.T) {
		assert.Equal(t, strings.Repeat("1", MaxTemplateParts), eval(t, strings.Repeat("${{ 1 }}", MaxTemplateParts), nil, nil))
	})
	t.Run("too many parts are refused", func(t *testing.T) {
		_, err := CompileTemplate(strings.Repeat("${{ 1 }}", MaxTemplateParts+1), nil)
		var ce *CompileError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, "expression too expensive: more than 128 ${{ }} parts", ce.Msg)
		assert.Equal(t, 8*MaxTemplateParts, ce.Offset, "the offset of the first part too many")
		assert.ErrorIs(t, err, ErrTooExpensive)
	})
	runAborted := []struct {
		name, src, want string
	}{
		{"nested closures over a bound list stop at run time", `let r = 1..1000; reduce(r, reduce(r, reduce(r, #acc + 1, 0), 0), 0)`, "expression too expensive: "},
		{"closures over an input list stop at run time", `reduce(inputs.tags, reduce(inputs.big, reduce(inputs.big, #acc + 1, 0), 0), 0)`, "expression too expensive: "},
		{"a doubling string stops", `reduce(1..64, #acc + #acc, "x")`, "builds more than"},
		{"a doubling list stops when rendered", `toJSON(reduce(1..60, [#acc, #acc], 1))`, "renders to more than"},
		{"a doubling list stops when returned", `reduce(1..60, [#acc, #acc], 1)`, "larger than"},
		{"flatten of a doubling list stops", `flatten(reduce(1..60, [#acc, #acc], 1))`, "builds more than"},
		{"a huge repeat stops", `repeat(repeat("x", 1000000), 1000000)`, "expression too expensive"},
		{"a huge range hits the memory budget", `len(1..100000000)`, "memory budget"},
		{"closures with costly iterations stop on time", `let s = repeat("ab", 500000); len(filter(1..100000, s contains "zz"))`, "closures ran longer than"},
		{"dynamic regexps count against the budget", `let p = repeat("a", 10000); len(filter(1..1000, "aaa" matches p))`, "builds more than"},
		{"a long dynamic regexp is refused", `"a" matches repeat("a", 100000)`, "longer than 16 KiB"},
		{"join of a repeated big string stops", `join(map(1..1000, repeat("x", 100000)), "")`, "builds more than"},
		{"a dynamic regexp just over 16 KiB is refused", `"a" matches repeat("a", 16385)`, "regular expression longer than 16 KiB"},
		{"concat of a huge list stops", `concat(1..200000, 1..100000)`, "concat: expression too expensive: builds more than"},
		{"reverse of a huge list is measured", `reverse(1..300000)`, "reverse: expression too expensive: builds more than"},
		{"split into a huge list is measured", `split(repeat(",", 300000), ",")`, "split: expression too expensive: builds more than"},
		{"fromPairs of a huge list is measured", `fromPairs(inputs.pairs)`, "fromPairs: expression too expensive: builds more than"},
		{"toJSON has only what is left of the budget", `let s = repeat("x", 3000000); toJSON([s, 1])`, "toJSON: expression too expensive: value renders to more than"},
		{"string has only what is left of the budget", `let s = repeat("x", 3000000); string(s)`, "string: expression too expensive: value renders to more than"},
		{"join has only what is left of the budget", `let s = repeat("x", 3000000); join([s], "")`, "join: expression too expensive: value renders to more than"},
		{"replace counts what its result grows by", `replace(inputs.text, "a", "aa")`, "replace: expression too expensive: builds more than"},
		{"replace of an empty string counts an insertion around every rune", `replace(inputs.mib2, "", "x")`, "replace: expression too expensive: builds more than"},
		{"a repeat count whose byte count overflows is refused", `repeat(inputs.mib2, 8796093022208)`, "repeat: expression too expensive: builds more than"},
		{"format has only what is left of the budget for a list", `let s = repeat("x", 3000000); format("%v", [s, 1])`, "format: expression too expensive: value renders to more than"},
		{"format counts six bytes per string byte, as %q may escape each", `format("%s", inputs.mib)`, "format: expression too expensive: builds more than"},
		{"urlEncode counts three bytes per byte, as each may be escaped", `urlEncode(inputs.mib2)`, "urlEncode: expression too expensive: builds more than"},
	}
	big := make([]any, 1000)
	for i := range big {
		big[i] = i
	}
	pairs := make([]any, 140000)
	for i := range pairs {
		pairs[i] = []any{i, i}
	}
	text, mib, mib2 := strings.Repeat("ab", 1500000), strings.Repeat("x", 1<<20), strings.Repeat("x", 2<<20)
	for _, tt := range runAborted {
		t.Run(tt.name, func(t *testing.T) {
			s := testScope()
			s.Inputs["big"] = big
			s.Inputs["pairs"] = pairs
			s.Inputs["text"] = text
			s.Inputs["mib"] = mib
			s.Inputs["mib2"] = mib2
			p, err := Compile(tt.src, nil)
			require.NoError(t, err)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err = p.Eval(s)
			runtime.ReadMemStats(&after)
			assert.ErrorContains(t, err, tt.want)
			assert.ErrorIs(t, err, ErrTooExpensive)
			// Work done before the stop is measured in bytes allocated, not
			// in wall time, which a loaded machine stretches: the largest
			// case allocates about 70 MB; without its budget, the dynamic
			// regexp case alone allocates about 2 GB.
			assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(128<<20), "bytes allocated before the evaluation stopped")
		})
	}
}

func TestReplaceBudget(t *testing.T) {
	s := testScope()
	s.Inputs["text"] = strings.Repeat("ab", 1500000)
	p, err := Compile(`replace(inputs.text, "ab", "")`, nil)
	require.NoError(t, err)
	got, err := p.Eval(s)
	require.NoError(t, err, "a replace that shrinks a long input builds nothing more than the input")
	assert.Equal(t, "", got)
}
