package steps

// The params of a registered step, seen from outside: Decode checks and
// converts an evaluated `with` map at run time, CheckLiteral and
// DecodeLiteral judge the literal parts at load time, and SetString and
// SetScalar let `runbook plan` put placeholders into decoded params. The
// tags they all follow are read in tags.go.

import (
	"reflect"

	"github.com/runbook/runbook/internal/fault"
)

// Dynamic marks a `with` value whose content is computed by an expression
// and so unknown at load time.
type Dynamic struct{}

// Decode converts an evaluated `with` map (JSON-like values: string, int,
// int64, float64, bool, []any, map[string]any, nil) into a new pointer to
// the params struct, checking types and every per-field constraint, then
// runs Check with no dynamic fields. Unknown keys are problems unless
// OpenParams (then they are returned in extra). When there are problems
// params is nil.
func (d *Descriptor) Decode(with map[string]any) (params any, extra map[string]any, problems []fault.Problem) {
	dc := decoder{}
	p, extra, broken := dc.top(d, with)
	if d.Check != nil {
		dc.problems = append(dc.problems, d.Check(p, broken)...)
	}
	if len(dc.problems) > 0 {
		return nil, extra, dc.problems
	}
	return p, extra, nil
}

// CheckLiteral validates `with` at load time. Values that are Dynamic (at
// any depth) are skipped for type and constraint checks but count as
// present for `required`; Check runs on a best-effort decoded struct with
// the dynamic top-level fields (and those that already have a problem) and
// the paths of dynamic values nested in literal ones.
func (d *Descriptor) CheckLiteral(with map[string]any) []fault.Problem {
	dc := decoder{literal: true}
	p, _, skip := dc.top(d, with)
	if d.Check != nil {
		dc.problems = append(dc.problems, d.Check(p, skip)...)
	}
	return dc.problems
}

// DecodeLiteral decodes `with` as CheckLiteral does: values that are
// Dynamic are left zero and named in dynamic (top-level fields, with those
// that have a problem, and nested paths). For checks that run on literal
// values only.
func (d *Descriptor) DecodeLiteral(with map[string]any) (params any, dynamic map[string]bool) {
	dc := decoder{literal: true}
	p, _, skip := dc.top(d, with)
	return p, skip
}

// SetString sets the top-level string param named name (its JSON name) in
// params, a pointer returned by Decode or DecodeLiteral. It reports false
// when there is no such string param. `runbook plan` uses it to show a
// value computed at run time as a placeholder in the calls it plans.
func (d *Descriptor) SetString(params any, name, value string) bool {
	v := reflect.ValueOf(params)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Type() != d.params {
		return false
	}
	for _, f := range d.paramFields() {
		if f.name != name {
			continue
		}
		fv, err := v.Elem().FieldByIndexErr(f.index)
		if err != nil || fv.Kind() != reflect.String || !fv.CanSet() {
			return false
		}
		fv.SetString(value)
		return true
	}
	return false
}

// SetScalar sets the top-level param name of decoded params to v, a
// string, float64, bool or []string converted to the field's kind (through a
// pointer field too). It reports whether the field took it. `runbook
// plan` uses it to trace a value known only at run time through a Plan
// hook.
func (d *Descriptor) SetScalar(params any, name string, v any) bool {
	pv := reflect.ValueOf(params)
	if pv.Kind() != reflect.Pointer || pv.IsNil() || pv.Elem().Type() != d.params {
		return false
	}
	for _, f := range d.paramFields() {
		if f.name != name {
			continue
		}
		fv, err := pv.Elem().FieldByIndexErr(f.index)
		if err != nil || !fv.CanSet() {
			return false
		}
		if fv.Kind() == reflect.Pointer {
			nv := reflect.New(fv.Type().Elem())
			if !setScalar(nv.Elem(), v) {
				return false
			}
			fv.Set(nv)
			return true
		}
		return setScalar(fv, v)
	}
	return false
}

func setScalar(fv reflect.Value, v any) bool {
	switch x := v.(type) {
	case string:
		if fv.Kind() == reflect.String {
			fv.SetString(x)
			return true
		}
	case []string:
		if fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.String {
			out := reflect.MakeSlice(fv.Type(), len(x), len(x))
			for i, e := range x {
				out.Index(i).SetString(e)
			}
			fv.Set(out)
			return true
		}
	case bool:
		if fv.Kind() == reflect.Bool {
			fv.SetBool(x)
			return true
		}
	case float64:
		switch fv.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			if fv.OverflowInt(int64(x)) {
				return false
			}
			fv.SetInt(int64(x))
			return true
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			if x < 0 || fv.OverflowUint(uint64(x)) {
				return false
			}
			fv.SetUint(uint64(x))
			return true
		case reflect.Float32, reflect.Float64:
			fv.SetFloat(x)
			return true
		}
	}
	return false
}

// ParamNames returns the JSON names of the params (for "did you mean").
func (d *Descriptor) ParamNames() []string {
	fs := d.paramFields()
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.name
	}
	return out
}
