package steps

import (
	"math"
	"strconv"
	"time"
)

// ExpressionPattern matches a string that is exactly one ${{ }} expression
// (surrounding blanks allowed). Such a value keeps the expression's native
// type, so the schema of every non-string param also accepts it.
const ExpressionPattern = `^\s*\$\{\{[\s\S]*\}\}\s*$`

// interpolationPattern matches a string containing an expression; a
// constrained string param (enum, pattern, length, format) accepts it since
// its value is only known at run time.
const interpolationPattern = `\$\{\{[\s\S]*\}\}`

// ParamsSchema returns the JSON Schema (draft 2020-12) of the `with` object.
// Every constraint of the params tags appears in it; a value that is an
// expression is accepted wherever a literal would be, and a required
// param may be given by an expression.
func (d *Descriptor) ParamsSchema() map[string]any {
	if d.params == nil && d.OpenParams {
		return map[string]any{"type": "object"}
	}
	s := objectSchema(d.paramFields())
	if d.OpenParams {
		delete(s, "additionalProperties")
	}
	return s
}

func objectSchema(fs []field) map[string]any {
	props := map[string]any{}
	var required []any
	for i := range fs {
		f := &fs[i]
		ps := valueSchema(f.shape, &f.rules)
		if f.desc != "" {
			ps["description"] = f.desc
		}
		if f.hasDef {
			ps["default"] = f.def
		}
		props[f.name] = ps
		if f.required {
			required = append(required, f.name)
		}
	}
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

// valueSchema is the schema of one value position, expression alternative
// included.
func valueSchema(s *shape, r *rules) map[string]any {
	s = unptr(s)
	if r == nil {
		r = &rules{minLen: -1, maxLen: -1}
	}
	var real map[string]any
	switch s.kind {
	case kAny:
		return map[string]any{}
	case kString:
		return stringSchema(r)
	case kBool:
		real = map[string]any{"type": "boolean"}
	case kInt, kFloat:
		real = numberSchema(s.kind, r)
	case kDuration:
		real = map[string]any{"type": []any{"string", "integer"}, "pattern": durationPattern, "minimum": 0}
		if r.min != nil {
			real["minimum"] = int64(math.Ceil(*r.min / float64(time.Second)))
		}
		if r.max != nil {
			real["maximum"] = int64(math.Floor(*r.max / float64(time.Second)))
		}
	case kSlice:
		real = map[string]any{"type": "array", "items": valueSchema(s.elem, r.leaf)}
		if r.minLen >= 0 {
			real["minItems"] = r.minLen
		}
		if r.maxLen >= 0 {
			real["maxItems"] = r.maxLen
		}
	case kMap:
		real = map[string]any{"type": "object", "additionalProperties": valueSchema(s.elem, r.leaf)}
		if r.minLen >= 0 {
			real["minProperties"] = r.minLen
		}
		if r.maxLen >= 0 {
			real["maxProperties"] = r.maxLen
		}
	case kStruct:
		real = objectSchema(s.fields)
	}
	return withExpr(real, ExpressionPattern)
}

// stringSchema is the schema of a string position. A constrained string
// also accepts any string holding an expression, whose value only the run
// knows.
func stringSchema(r *rules) map[string]any {
	real := map[string]any{"type": "string"}
	if r.minLen >= 0 {
		real["minLength"] = r.minLen
	}
	if r.maxLen >= 0 {
		real["maxLength"] = r.maxLen
	}
	if len(r.enum) > 0 {
		real["enum"] = stringsAny(r.enum)
	}
	switch {
	case r.pattern != nil:
		real["pattern"] = r.pattern.String()
		if r.like != "" {
			real["examples"] = []any{r.like}
		}
	case r.format == "duration":
		real["pattern"] = durationPattern
	case r.format == "semver":
		real["pattern"] = semverRe().String()
	}
	if r.format == "uri" {
		real["format"] = "uri"
	}
	if len(real) == 1 && r.format == "" {
		return real // any string, expressions included
	}
	return withExpr(real, interpolationPattern)
}

// numberSchema is the schema of an integer or number position, without
// the expression alternative.
func numberSchema(k kind, r *rules) map[string]any {
	real := map[string]any{"type": "number"}
	if k == kInt {
		real["type"] = "integer"
	}
	if r.min != nil {
		real["minimum"] = jsonNumber(*r.min)
	}
	if r.max != nil {
		real["maximum"] = jsonNumber(*r.max)
	}
	if len(r.enum) > 0 {
		var e []any
		for _, x := range r.enum {
			n, _ := strconv.ParseInt(x, 10, 64)
			e = append(e, n)
		}
		real["enum"] = e
	}
	return real
}

func withExpr(real map[string]any, pattern string) map[string]any {
	return map[string]any{"anyOf": []any{real, map[string]any{"type": "string", "pattern": pattern}}}
}

func jsonNumber(f float64) any {
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return int64(f)
	}
	return f
}

func stringsAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// OutputsSchema returns a JSON Schema of the step's outputs, for docs and
// editor support. Steps with open outputs allow more properties.
func (d *Descriptor) OutputsSchema() map[string]any {
	props := map[string]any{}
	for _, o := range d.Outputs {
		p := map[string]any{}
		switch o.Type {
		case "string", "integer", "number", "boolean":
			p["type"] = o.Type
		case "list":
			p["type"] = "array"
		case "map":
			p["type"] = "object"
		}
		if o.Description != "" {
			p["description"] = o.Description
		}
		props[o.Name] = p
	}
	s := map[string]any{"type": "object", "properties": props}
	if !d.OpenOutputs && !d.OutputsFromWith {
		s["additionalProperties"] = false
	}
	return s
}
