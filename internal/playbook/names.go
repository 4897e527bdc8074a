package playbook

// The patterns of a playbook's name and of its labels, as the JSON Schema
// publishes them. The loader checks them by hand (validName, labelKey,
// labelValue): a bounded repetition such as {0,62} compiles into a
// program of 62 copies, and compiling the name's pattern was 1.5% of a
// one-step `runbook run`. TestTheNameChecksMatchTheirPatterns holds each
// check to its pattern.
const (
	namePattern       = `^[a-z0-9][a-z0-9._-]{0,62}$`
	labelKeyPattern   = `^[a-z0-9]([a-z0-9._/-]{0,61}[a-z0-9])?$`
	labelValuePattern = `^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$`
)

// validName reports whether s is a playbook's name (namePattern).
func validName(s string) bool { return shortName(s, lowerOrDigit, nameByte(lowerOrDigit, "._-"), nil) }

// labelKey reports whether s is a label's name (labelKeyPattern).
func labelKey(s string) bool {
	return shortName(s, lowerOrDigit, nameByte(lowerOrDigit, "._/-"), lowerOrDigit)
}

// labelValue reports whether s is a label's value (labelValuePattern).
func labelValue(s string) bool {
	return shortName(s, letterOrDigit, nameByte(letterOrDigit, "._-"), letterOrDigit)
}

// shortName reports whether s has 1 to 63 bytes, the first one first, the
// others rest, and, when last is set and s has two bytes or more, the
// last one last.
func shortName(s string, first, rest, last func(byte) bool) bool {
	if len(s) == 0 || len(s) > 63 || !first(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !rest(s[i]) {
			return false
		}
	}
	return last == nil || len(s) == 1 || last(s[len(s)-1])
}

func lowerOrDigit(c byte) bool  { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }
func letterOrDigit(c byte) bool { return lowerOrDigit(c) || 'A' <= c && c <= 'Z' }

// nameByte is class, or one of the bytes of also.
func nameByte(class func(byte) bool, also string) func(byte) bool {
	return func(c byte) bool {
		if class(c) {
			return true
		}
		for i := range len(also) {
			if also[i] == c {
				return true
			}
		}
		return false
	}
}
