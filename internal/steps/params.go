package steps

// PLACEHOLDER: replaced by the params implementation (decode, load-time
// checks, JSON Schema). Signatures below are the contract.

import "reflect"

type field struct{}

func fieldsOf(t reflect.Type) ([]field, error) { return nil, nil }

// Dynamic marks a `with` value whose content is computed by an expression
// and so unknown at load time.
type Dynamic struct{}

// Decode converts an evaluated `with` map (JSON-like values: string, int,
// int64, float64, bool, []any, map[string]any, nil) into a new pointer to
// the params struct, checking types and every per-field constraint, then
// runs Check with no dynamic fields. Unknown keys are problems unless
// OpenParams (then they are returned in extra).
func (d *Descriptor) Decode(with map[string]any) (params any, extra map[string]any, problems []Problem) {
	return nil, with, nil
}

// CheckLiteral validates `with` at load time. Values that are Dynamic (at
// any depth) are skipped for type and constraint checks but count as
// present for `required`; Check runs with the dynamic top-level fields.
func (d *Descriptor) CheckLiteral(with map[string]any) []Problem { return nil }

// ParamNames returns the JSON names of the params (for "did you mean").
func (d *Descriptor) ParamNames() []string { return nil }

// ParamsSchema returns the JSON Schema (draft 2020-12) of the `with` object.
func (d *Descriptor) ParamsSchema() map[string]any { return map[string]any{"type": "object"} }
