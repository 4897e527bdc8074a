package state

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// The subjects of the agents' notices go out each once, in Keys within a
// notice's bound.
func TestAgentNoticeKeysCarryEachSubjectOnceWithinTheBound(t *testing.T) {
	var subjects []string
	for i := range 600 {
		subjects = append(subjects, AgentSessionSubject(fmt.Sprintf("s-%016d", i%500)))
	}
	keys := AgentNoticeKeys(subjects)
	if len(keys) < 2 {
		t.Fatalf("%d keys for 500 subjects of 20 bytes, want them split", len(keys))
	}
	var got []string
	for _, k := range keys {
		if len(k) > maxAgentNoticeKey {
			t.Errorf("a key of %d bytes, above %d", len(k), maxAgentNoticeKey)
		}
		got = append(got, strings.Fields(k)...)
	}
	want := slices.Compact(slices.Sorted(slices.Values(subjects)))
	if !slices.Equal(got, want) {
		t.Errorf("the keys carry %d subjects, want the %d distinct ones once each", len(got), len(want))
	}
	if AgentNoticeKeys(nil) != nil {
		t.Error("no subject, no key")
	}
}
