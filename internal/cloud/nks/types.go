package nks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Labels are the string labels of a cluster or node group as the API
// answers them. The spec documents every label as a string; samples show
// booleans and numbers too, which are kept as text (true -> "True", as
// the documented True/False flags, 24 -> "24"). null becomes "".
type Labels map[string]string

// UnmarshalJSON accepts string, boolean, number and null values.
func (l *Labels) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if raw == nil {
		*l = nil
		return nil
	}
	out := make(Labels, len(raw))
	for k, v := range raw {
		var t Text
		if err := t.UnmarshalJSON(v); err != nil {
			return fmt.Errorf("label %s: %w", k, err)
		}
		out[k] = string(t)
	}
	*l = out
	return nil
}

// Bool reads a True/False label ("True", "true", "1"); false when absent.
func (l Labels) Bool(key string) bool {
	b, _ := strconv.ParseBool(l[key])
	return b
}

// Text is a string field that samples also show as a boolean or number
// (autoscaler settings, IP access control enable). Booleans read as
// "True"/"False", numbers as their JSON text, null as "".
type Text string

// UnmarshalJSON accepts string, boolean, number and null values.
func (t *Text) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || string(b) == "null":
		*t = ""
	case b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*t = Text(s)
	case string(b) == "true":
		*t = "True"
	case string(b) == "false":
		*t = "False"
	case b[0] == '-' || (b[0] >= '0' && b[0] <= '9'):
		*t = Text(b)
	default:
		return fmt.Errorf("want a string, boolean or number, got %s", snippet(b))
	}
	return nil
}

// Bool reads the text as a flag ("True", "true", "1").
func (t Text) Bool() bool {
	b, _ := strconv.ParseBool(string(t))
	return b
}

// Int reads the text as an integer (0 when it is not one).
func (t Text) Int() int {
	n, _ := strconv.Atoi(strings.TrimSpace(string(t)))
	return n
}

// Link is an entry of an answer's links (rel self or bookmark).
type Link struct {
	Href string `json:"href"`
	Rel  string `json:"rel"`
}

// ParseTime reads a time of the API: ISO 8601 with an offset
// ("2024-02-27T06:12:15+00:00"), with Z, with or without fractional
// seconds, or without a zone (taken as UTC, as the spec says times are).
func ParseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05.999999999-0700"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("time %q is not ISO 8601", s)
}
