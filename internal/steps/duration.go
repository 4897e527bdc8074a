package steps

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Duration is a params field holding a length of time. In `with` it is a
// Go duration string ("30s", "1h30m") or an integer number of seconds.
// Negative durations are rejected.
type Duration time.Duration

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String formats d compactly: "30s", "5m", "1h30m", "720h".
func (d Duration) String() string {
	s := time.Duration(d).String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// MarshalJSON writes d as its string form.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a duration string or an integer number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	var dc decoder
	x, ok := dc.duration("", v)
	if !ok {
		return fmt.Errorf("duration: %s", dc.problems[0].Message)
	}
	*d = x
	return nil
}

// durationPattern matches what time.ParseDuration accepts (without sign),
// for the JSON Schema.
const durationPattern = `^\s*(0|([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))*)\s*$`
