package all_test

import (
	"regexp"
	"sort"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/runbook/runbook/internal/steps"
)

// documentedBound finds the limits a param's description states: "1 to
// 10", "up to 255 characters", "at most 100".
var documentedBound = regexp.MustCompile(`\b(?:(\d+) to (\d+)|(?:up to|at most) (\d+))\b`)

// notALimit lists descriptions whose numbers describe behaviour, not a
// value the param may take.
var notALimit = map[string]bool{
	"http.request.follow_redirects": true, // a boolean: follow up to 10 redirects
	// The API takes 50 characters; the SDK's comment advising 30 is quoted
	// as advice.
	"easymaker.endpoint.create_stage.stage_name": true,
}

var boundKeys = []string{"minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"}

// TestEveryDocumentedRangeIsInTheSchema walks the registry: each number a
// param's description gives as a limit must be a bound somewhere in that
// param's schema, so editors and `validate` refuse what the step refuses.
func TestEveryDocumentedRangeIsInTheSchema(t *testing.T) {
	checked := 0
	for _, d := range steps.All() {
		props, _ := d.ParamsSchema()["properties"].(map[string]any)
		names := make([]string, 0, len(props))
		for name := range props {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			ps, _ := props[name].(map[string]any)
			desc, _ := ps["description"].(string)
			if notALimit[d.Type+"."+name] {
				continue
			}
			bounds := map[float64]bool{}
			collectBounds(ps, bounds)
			for _, m := range documentedBound.FindAllStringSubmatch(desc, -1) {
				for _, s := range m[1:] {
					if s == "" || s == "0" {
						continue
					}
					n, _ := strconv.ParseFloat(s, 64)
					checked++
					assert.True(t, bounds[n], "%s %s: the description says %q but the schema has no bound %s (has %v): put it in a tag",
						d.Type, name, m[0], s, keysOf(bounds))
				}
			}
		}
	}
	assert.Greater(t, checked, 50, "the walk found too few documented limits: did descriptions change form?")
}

func TestTheRangeWalkSeesNestedBounds(t *testing.T) {
	bounds := map[float64]bool{}
	collectBounds(map[string]any{"anyOf": []any{
		map[string]any{"type": "array", "maxItems": 10.0, "items": map[string]any{"properties": map[string]any{"podCount": map[string]any{"minimum": 1, "maximum": 100}}}},
		map[string]any{"type": "string", "pattern": "x"},
	}}, bounds)
	assert.Equal(t, map[float64]bool{10: true, 1: true, 100: true}, bounds)
	assert.Equal(t, []string{"1 to 10", "up to 255", "at most 100"},
		firsts(documentedBound.FindAllStringSubmatch("1 to 10 nodes, names up to 255 characters, at most 100 fields", -1)))
}

// collectBounds gathers every numeric bound in a schema subtree.
func collectBounds(v any, into map[float64]bool) {
	switch s := v.(type) {
	case map[string]any:
		for _, k := range boundKeys {
			switch n := s[k].(type) {
			case float64:
				into[n] = true
			case int:
				into[float64(n)] = true
			case int64:
				into[float64(n)] = true
			}
		}
		for _, sub := range s {
			collectBounds(sub, into)
		}
	case []any:
		for _, sub := range s {
			collectBounds(sub, into)
		}
	}
}

func keysOf(m map[float64]bool) []float64 {
	out := make([]float64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Float64s(out)
	return out
}

func firsts(ms [][]string) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m[0]
	}
	return out
}
