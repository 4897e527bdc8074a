package playtest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/runbook/runbook/internal/expr"
	"github.com/runbook/runbook/internal/state"
)

// checker evaluates a case's expectations against what happened.
type checker struct {
	cr  *caseRun
	out []Failure
}

func (k *checker) fail(pos Pos, path, format string, args ...any) {
	k.out = append(k.out, Failure{Pos: pos, Path: path, Message: fmt.Sprintf(format, args...)})
}

// check returns every expectation of the case that does not hold.
func (cr *caseRun) check(runs []RunTrace) []Failure {
	k := &checker{cr: cr}
	e := cr.c.Expect
	var last *RunTrace
	if len(runs) > 0 {
		last = &runs[len(runs)-1]
	}
	k.run(&e.Run, last, "")
	if e.RunCount != nil {
		k.compare(e.RunCount, "runs", len(runs), k.scope(last, nil))
	}
	for i, re := range e.Runs {
		path := fmt.Sprintf("runs[%d]", i)
		if i >= len(runs) {
			k.fail(re.Pos, path, "expected a run #%d, got %d runs", i+1, len(runs))
			continue
		}
		k.run(re, &runs[i], path+".")
	}
	k.deliveries(e)
	calls := cr.sink.journal()
	k.calls(e, calls)
	k.files(e.Files)
	for i, c := range e.That {
		scope := k.scope(last, nil)
		v, err := c.Expr.Eval(scope)
		path := fmt.Sprintf("that[%d]", i)
		switch {
		case err != nil:
			k.fail(c.Pos, path, "%s: %v", c.Source, err)
		case v != true:
			k.fail(c.Pos, path, "%s is %s, expected true", c.Source, show(v))
		}
	}
	return k.out
}

// run checks one run's status, error, outputs and steps.
func (k *checker) run(re *RunExpect, tr *RunTrace, prefix string) {
	if tr == nil {
		if re.Status != nil || re.Error != nil || len(re.Steps) > 0 || len(re.Outputs) > 0 {
			k.fail(re.Pos, strings.TrimSuffix(prefix, "."), "expected a run, but the case started none")
		}
		return
	}
	scope := k.scope(tr, nil)
	if re.Status != nil {
		k.compare(re.Status, prefix+"status", tr.Status, scope)
	}
	if re.Error != nil {
		k.errorRecord(re.Error, prefix+"error", tr.Error, scope)
	}
	var outputs map[string]any
	if tr.Run != nil {
		outputs = tr.Run.Outputs
	}
	for _, v := range re.Outputs {
		k.value(v, prefix+"outputs."+v.Name, outputs, k.scope(tr, outputs))
	}
	recs := map[string]*state.StepRecord{}
	for _, r := range tr.Steps {
		recs[r.ID] = r
	}
	for _, se := range re.Steps {
		k.step(se, prefix+"steps."+se.ID, recs[se.ID], tr)
	}
}

// value checks one named value of m (a missing name is nil).
func (k *checker) value(v *ValueExpect, path string, m map[string]any, scope *expr.Scope) {
	actual, ok := m[v.Name]
	if !ok && v.Want.Expr == nil && v.Want.Literal != nil {
		k.fail(v.Want.Pos, path, "expected %s, got no such output (have: %s)", show(v.Want.Literal), strings.Join(sortedKeys(m), ", "))
		return
	}
	k.compare(v.Want, path, actual, scope)
}

func (k *checker) step(se *StepExpect, path string, rec *state.StepRecord, tr *RunTrace) {
	status := "not_run"
	if rec != nil {
		status = string(rec.Status)
	}
	var outputs map[string]any
	if rec != nil {
		outputs = rec.Outputs
	}
	scope := k.scope(tr, outputs)
	if se.Status != nil {
		if !k.compare(se.Status, path+".status", status, scope) && rec != nil && rec.Error != nil {
			k.out[len(k.out)-1].Message += " (" + rec.Error.Message + ")"
		}
	}
	if se.Attempts != nil {
		attempts := 0
		if rec != nil {
			attempts = rec.Attempts
		}
		k.compare(se.Attempts, path+".attempts", attempts, scope)
	}
	if se.Error != nil {
		var er *state.ErrorRecord
		if rec != nil {
			er = rec.Error
		}
		k.errorRecord(se.Error, path+".error", er, scope)
	}
	for _, v := range se.Outputs {
		k.value(v, path+".outputs."+v.Name, outputs, scope)
	}
}

func (k *checker) errorRecord(e *ErrorExpect, path string, er *state.ErrorRecord, scope *expr.Scope) {
	if er == nil {
		pos := Pos{}
		switch {
		case e.Code != nil:
			pos = e.Code.Pos
		case e.Contains != nil:
			pos = e.Contains.Pos
		}
		k.fail(pos, path, "expected an error, got none")
		return
	}
	if e.Code != nil {
		k.compare(e.Code, path+".code", er.Code, scope)
	}
	if e.Contains != nil {
		want, err := k.want(e.Contains, scope)
		if err != nil {
			k.fail(e.Contains.Pos, path, "%v", err)
			return
		}
		if s := fmt.Sprint(want); !strings.Contains(er.Message, s) {
			k.fail(e.Contains.Pos, path, "expected a message containing %q, got %q", s, er.Message)
		}
	}
}

func (k *checker) deliveries(e Expect) {
	got := k.cr.deliveries
	for i, c := range e.Deliveries {
		path := fmt.Sprintf("deliveries[%d]", i)
		if i >= len(got) {
			k.fail(c.Pos, path, "expected delivery #%d to be answered, got %d deliveries", i+1, len(got))
			continue
		}
		k.compare(c, path, got[i], k.scope(nil, nil))
	}
	if len(e.Deliveries) > 0 && len(got) > len(e.Deliveries) {
		k.fail(e.Deliveries[0].Pos, "deliveries", "expected %d deliveries, got %d: %s", len(e.Deliveries), len(got), strings.Join(got, ", "))
	}
}

// want returns the expected value of c: its literal, or its expression's
// value.
func (k *checker) want(c *Check, scope *expr.Scope) (any, error) {
	if c.Expr == nil {
		return c.Literal, nil
	}
	v, err := c.Expr.Eval(scope)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Source, err)
	}
	return v, nil
}

// compare checks actual against c and reports whether it held. An
// expression's value is compared like a literal, except that a boolean
// against a value that is not one is a condition that must be true.
func (k *checker) compare(c *Check, path string, actual any, scope *expr.Scope) bool {
	want, err := k.want(c, scope)
	if err != nil {
		k.fail(c.Pos, path, "%v", err)
		return false
	}
	if b, isBool := want.(bool); isBool && c.Expr != nil {
		if _, actualBool := actual.(bool); !actualBool {
			if !b {
				k.fail(c.Pos, path, "%s is false for %s", c.Source, show(actual))
			}
			return b
		}
	}
	if equal(want, actual) {
		return true
	}
	k.fail(c.Pos, path, "expected %s, got %s", show(want), show(actual))
	return false
}

// scope is what expressions in expectations read: the run's inputs,
// steps, trigger and status, the case's env, and result (the outputs of
// the step or run being checked).
func (k *checker) scope(tr *RunTrace, result map[string]any) *expr.Scope {
	s := &expr.Scope{Env: k.cr.env, Steps: map[string]*expr.StepState{}}
	if tr != nil {
		s = traceScope(tr, k.cr.env)
		if tr.Run == nil {
			s.Run.Status = tr.Status
		}
	}
	s.Result, s.Now = result, k.cr.srv.Clock.Now
	return s
}

// equal compares two values as JSON would see them (3 == 3.0, int64 ==
// int), maps and lists deeply.
func equal(a, b any) bool {
	return reflect.DeepEqual(normal(a), normal(b))
}

// normal is v through a JSON round trip (nil when it cannot encode).
func normal(v any) any {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	var out any
	if json.Unmarshal(raw, &out) != nil {
		return nil
	}
	return out
}

// show formats a value for a message: strings quoted, the rest as JSON.
func show(v any) string {
	if v == nil {
		return "nothing"
	}
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	const maxShown = 400
	if len(raw) > maxShown {
		return string(raw[:maxShown]) + "…"
	}
	return string(raw)
}
