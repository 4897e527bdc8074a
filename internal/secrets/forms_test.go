package secrets_test

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/runbook/runbook/internal/secrets"
)

// What a program prints after transforming a secret it was given.
func TestProgramForms(t *testing.T) {
	const tok = "Xk9vQ2mP7rT4wZ1aB8cD"
	r := redactor(tok, "s3Cr7")
	rev := func(s string) string {
		b := []byte(s)
		for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
			b[i], b[j] = b[j], b[i]
		}
		return string(b)
	}
	s256 := sha256.Sum256([]byte(tok + "\n"))
	s1 := sha1.Sum([]byte(tok))
	m5 := md5.Sum([]byte(tok))
	cases := []struct{ name, leak string }{
		{"upper case (tr a-z A-Z)", strings.ToUpper(tok)},
		{"lower case", strings.ToLower(tok)},
		{"reversed (rev)", rev(tok)},
		{"reversed and upper-cased", strings.ToUpper(rev(tok))},
		{"the first 12 characters (cut -c1-12)", tok[:12]},
		{"8 characters from the middle", tok[5:13]},
		{"the last 9 characters, lower-cased", strings.ToLower(tok[11:])},
		{"sha256sum of echo", hex.EncodeToString(s256[:])},
		{"sha1 hex upper-case", strings.ToUpper(hex.EncodeToString(s1[:]))},
		{"md5 base64", base64.StdEncoding.EncodeToString(m5[:])},
		{"a short secret upper-cased", "S3CR7"},
		{"a short secret reversed", "7rC3s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := r.String("out: " + tc.leak + " end")
			if out != "out: *** end" {
				t.Errorf("String(%q) = %q, want it masked", tc.leak, out)
			}
			if !r.Contains(tc.leak) {
				t.Errorf("Contains(%q) = false", tc.leak)
			}
		})
	}
	t.Run("a 7-byte fragment is left alone", func(t *testing.T) {
		if out := r.String("x " + tok[:7] + " y"); out != "x "+tok[:7]+" y" {
			t.Errorf("got %q", out)
		}
	})
	t.Run("a fragment in bytes is masked", func(t *testing.T) {
		if out := string(r.Bytes([]byte("a" + tok[3:15] + "b"))); out != "a***b" {
			t.Errorf("got %q", out)
		}
	})
}

func TestAddDerived(t *testing.T) {
	r := secrets.NewRedactor()
	r.AddDerived("h e l l o - w o r l d", "Prefix-value-12")
	t.Run("a derived value and its encodings are masked", func(t *testing.T) {
		for _, in := range []string{"h e l l o - w o r l d", base64.StdEncoding.EncodeToString([]byte("Prefix-value-12"))} {
			if out := r.String("[" + in + "]"); out != "[***]" {
				t.Errorf("String(%q) = %q", in, out)
			}
		}
	})
	t.Run("its fragments and letter cases are not", func(t *testing.T) {
		for _, in := range []string{"Prefix-value", "PREFIX-VALUE-12"} {
			if out := r.String(in); out != in {
				t.Errorf("String(%q) = %q, want it unchanged", in, out)
			}
		}
	})
	t.Run("adding a derived value as a secret later adds the program forms", func(t *testing.T) {
		r.Add("Prefix-value-12")
		if out := r.String("PREFIX-VALUE"); out != "***" {
			t.Errorf("got %q", out)
		}
	})
}
