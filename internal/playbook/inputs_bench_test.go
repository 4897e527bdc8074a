package playbook

import "testing"

// BenchmarkInputCheckPattern checks a value against an input's pattern,
// as every run a webhook starts does (sms-unsubscribe's phone number).
func BenchmarkInputCheckPattern(b *testing.B) {
	in := &Input{Name: "number", Type: "string", Pattern: `^0[0-9]{8,11}$`}
	for b.Loop() {
		if err := in.Check("0808885555"); err != nil {
			b.Fatal(err)
		}
	}
}
