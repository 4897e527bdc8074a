package suggest

import "testing"

func TestClosest(t *testing.T) {
	names := []string{"needs", "name", "uses", "with", "timeout", "nks.cluster.create", "node_count", "on", "id", "code", "status", "level"}
	tests := []struct {
		name, in, want string
	}{
		{"a dropped letter is found", "neds", "needs"},
		{"a swapped pair is found", "wtih", "with"},
		{"case does not count", "TimeOut", "timeout"},
		{"a long dotted name tolerates three edits", "nks.clster.creat", "nks.cluster.create"},
		{"a short word tolerates one edit only", "ix", "id"},
		{"two edits in a four-letter word are too many", "nope", ""},
		{"a swap of neighbours is one edit", "stauts", "status"},
		{"an abbreviation of a longer name is found", "lvl", "level"},
		{"a far word gets nothing", "banana", ""},
		{"an exact match is not suggested", "uses", ""},
		{"a candidate is not replaced wholesale", "xy", ""},
		{"ties go to the first in sort order", "nme", "name"},
		{"a huge input is never compared", string(make([]byte, 100)), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Closest(tt.in, names); got != tt.want {
				t.Errorf("Closest(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestHintReadsAsASuffix(t *testing.T) {
	if got := Hint("neds", []string{"needs"}); got != `; did you mean "needs"?` {
		t.Errorf("Hint = %q", got)
	}
	if got := Hint("zzz", []string{"needs"}); got != "" {
		t.Errorf("Hint for a far word = %q, want empty", got)
	}
}
