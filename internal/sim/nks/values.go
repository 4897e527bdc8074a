package nks

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// flexInt accepts a JSON number or a string holding one: the spec types
// several counts as String while its samples send integers.
type flexInt struct {
	v   int
	set bool
}

func (f *flexInt) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err == nil {
		i, err := strconv.Atoi(n.String())
		if err != nil {
			return fmt.Errorf("%s is not an integer", n)
		}
		f.v, f.set = i, true
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%s is not an integer", b)
	}
	i, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("%q is not an integer", s)
	}
	f.v, f.set = i, true
	return nil
}

// or returns the value, or def when absent.
func (f flexInt) or(def int) int {
	if f.set {
		return f.v
	}
	return def
}

// flexString accepts a JSON string, boolean or number and keeps it as the
// API's label string (booleans become True/False).
type flexString struct {
	v   string
	set bool
}

func (f *flexString) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	s, err := labelString(v)
	if err != nil {
		return err
	}
	f.v, f.set = s, true
	return nil
}

// labels decodes a label object whose values may be strings, booleans or
// numbers into the API's all-string form.
type labels map[string]string

func (l *labels) UnmarshalJSON(b []byte) error {
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*l = labels{}
	for k, v := range raw {
		if v == nil {
			continue
		}
		s, err := labelString(v)
		if err != nil {
			return fmt.Errorf("label %s: %w", k, err)
		}
		(*l)[k] = s
	}
	return nil
}

func labelString(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case bool:
		if v {
			return "True", nil
		}
		return "False", nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	default:
		return "", fmt.Errorf("must be a string, a boolean or a number")
	}
}

// labelValue turns a stored label string into the typed value the
// autoscaler read answers: booleans for flags, integers for counts.
func labelValue(s string) any {
	if strings.EqualFold(s, "true") || strings.EqualFold(s, "false") {
		return strings.EqualFold(s, "true")
	}
	if i, err := strconv.Atoi(s); err == nil {
		return i
	}
	return s
}

func copyLabels(l map[string]string) map[string]string {
	out := make(map[string]string, len(l))
	for k, v := range l {
		out[k] = v
	}
	return out
}
