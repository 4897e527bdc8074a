package secrets_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runbook/runbook/internal/secrets"
)

func writeFile(t *testing.T, name, content string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // not subject to umask
		t.Fatal(err)
	}
	return path
}

func TestLookup(t *testing.T) {
	file := writeFile(t, "secrets.yaml", "TOKEN: from-file\nONLY_FILE: file-value\nPIN: 0123\nquoted: 'a: b'\n", 0o600)
	environ := []string{
		"RUNBOOK_SECRET_TOKEN=from-prefixed-env",
		"TOKEN=from-plain-env",
		"ONLY_FILE=plain-env-loses-to-file",
		"PLAIN=from-plain-env",
		"RUNBOOK_SECRET_DB_PASSWORD=normalized",
		"EMPTY=",
		"RUNBOOK_SECRET_BLANK=",
		"BLANK=blank-falls-through",
		"WITH_EQUALS=a=b=c",
	}
	src, err := secrets.NewSource(environ, file)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		secret string
		want   string
		found  bool
	}{
		{"the prefixed variable wins over the file and the plain variable", "TOKEN", "from-prefixed-env", true},
		{"the file wins over the plain variable", "ONLY_FILE", "file-value", true},
		{"the plain variable is the last resort", "PLAIN", "from-plain-env", true},
		{"a dotted lower-case name finds its upper-case variable", "db.password", "normalized", true},
		{"an empty variable counts as unset", "EMPTY", "", false},
		{"an empty prefixed variable falls through to the next source", "BLANK", "blank-falls-through", true},
		{"YAML numbers keep their text", "PIN", "0123", true},
		{"YAML quoting is honoured", "quoted", "a: b", true},
		{"values may contain equals signs", "WITH_EQUALS", "a=b=c", true},
		{"an unknown name is not found", "MISSING", "", false},
		{"an empty name is not found", "", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := src.Lookup(tc.secret)
			if got != tc.want || ok != tc.found {
				t.Errorf("Lookup(%q) = %q, %v; want %q, %v", tc.secret, got, ok, tc.want, tc.found)
			}
		})
	}
	if w := src.Warnings(); len(w) != 0 {
		t.Errorf("warnings for a 0600 file: %v", w)
	}
}

func TestSecretsFile(t *testing.T) {
	cases := []struct {
		name    string
		file    string
		content string
		want    map[string]string
	}{
		{"a JSON file is a map of names to strings", "s.json", `{"API_KEY": "k-123", "N": 0.10, "ON": true}`,
			map[string]string{"API_KEY": "k-123", "N": "0.10", "ON": "true"}},
		{"a YAML file is a map of names to strings", "s.yml", "# comment\nAPI_KEY: k-123\nmulti: |\n  line1\n  line2\n",
			map[string]string{"API_KEY": "k-123", "multi": "line1\nline2\n"}},
		{"a dotenv file holds NAME=value lines", "s.env",
			"# comment\nexport API_KEY=k-123\nQUOTED=\"a \\\"b\\\"\\nc\"\nSINGLE='x #y $z'\nBARE=v # trailing comment\n\nEMPTY=\n",
			map[string]string{"API_KEY": "k-123", "QUOTED": "a \"b\"\nc", "SINGLE": "x #y $z", "BARE": "v", "EMPTY": ""}},
		{"a file without extension holding dotenv lines is read as dotenv", "secrets", "A=1\nB=two\n",
			map[string]string{"A": "1", "B": "two"}},
		{"a file without extension holding JSON is read as JSON", "secrets", `{"A": "1"}`,
			map[string]string{"A": "1"}},
		{"a file without extension holding YAML is read as YAML", "secrets", "A: one\nB: two\n",
			map[string]string{"A": "one", "B": "two"}},
		{"an empty YAML file defines nothing", "s.yaml", "", map[string]string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src, err := secrets.NewSource(nil, writeFile(t, tc.file, tc.content, 0o600))
			if err != nil {
				t.Fatal(err)
			}
			if len(src.FileNames()) != len(tc.want) {
				t.Errorf("names = %v, want %d", src.FileNames(), len(tc.want))
			}
			for k, want := range tc.want {
				got, _ := src.Lookup(k)
				if got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
		})
	}
}

func TestSecretsFileErrors(t *testing.T) {
	cases := []struct {
		name, file, content, wantInError string
	}{
		{"a YAML list is refused with its position", "s.yaml", "- a\n- b\n", "s.yaml:1:1"},
		{"a nested YAML value is refused with its position", "s.yaml", "A: ok\nB:\n  c: d\n", "s.yaml:3:3: B"},
		{"malformed YAML is refused", "s.yaml", "A: [unclosed\n", "parse YAML"},
		{"a nested JSON value is refused", "s.json", `{"A": {"b": "c"}}`, "A: want a string"},
		{"malformed JSON is refused", "s.json", `{"A": `, "JSON object"},
		{"a dotenv line without = is refused with its line", "s.env", "A=1\nnot a pair\n", "s.env:2"},
		{"an unterminated quote is refused", "s.env", "A=\"open\n", "unterminated"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, tc.file, tc.content, 0o600)
			_, err := secrets.NewSource(nil, path)
			if err == nil || !strings.Contains(err.Error(), tc.wantInError) {
				t.Fatalf("error = %v, want one containing %q", err, tc.wantInError)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}

	t.Run("a missing file is an error", func(t *testing.T) {
		if _, err := secrets.NewSource(nil, filepath.Join(t.TempDir(), "absent.yaml")); err == nil {
			t.Fatal("no error")
		}
	})
}

func TestSecretsFilePermissions(t *testing.T) {
	t.Run("a file others can read is used with a warning", func(t *testing.T) {
		path := writeFile(t, "s.env", "A=1\n", 0o644)
		src, err := secrets.NewSource(nil, path)
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := src.Lookup("A"); v != "1" {
			t.Errorf("A = %q", v)
		}
		w := src.Warnings()
		if len(w) != 1 || !strings.Contains(w[0], path) || !strings.Contains(w[0], "chmod 600") {
			t.Errorf("warnings = %q", w)
		}
	})

	t.Run("a private file gives no warning", func(t *testing.T) {
		src, err := secrets.NewSource(nil, writeFile(t, "s.env", "A=1\n", 0o600))
		if err != nil {
			t.Fatal(err)
		}
		if w := src.Warnings(); len(w) != 0 {
			t.Errorf("warnings = %q", w)
		}
	})
}
