package secrets

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v4"
)

// EnvPrefix is the prefix of environment variables that hold secrets: the
// secret FOO is read from RUNBOOK_SECRET_FOO before anything else.
const EnvPrefix = "RUNBOOK_SECRET_"

// Source resolves secret names. A name resolves, in order, from the
// environment variable EnvPrefix+name (or EnvPrefix+NAME, upper-cased with
// characters other than letters, digits and '_' turned into '_'), from the
// secrets file, and last from the environment variable name itself. Empty
// values count as unset.
//
// A Source is immutable after NewSource and safe for concurrent use.
type Source struct {
	env      map[string]string
	file     map[string]string
	path     string
	warnings []string
}

// NewSource builds a source over environ ("KEY=value" entries, as
// os.Environ returns) and the secrets file at file ("" for none).
//
// The file is a map of name to string value, as YAML (.yaml, .yml), JSON
// (.json) or dotenv lines (NAME=value; .env). Other names are recognized by
// content. A file readable by group or others is still used, with a warning
// (see Warnings).
func NewSource(environ []string, file string) (*Source, error) {
	s := &Source{env: make(map[string]string, len(environ)), path: file}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			s.env[k] = v
		}
	}
	if file == "" {
		return s, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read secrets file: %w", err)
	}
	if fi, err := os.Stat(file); err == nil && fi.Mode().Perm()&0o077 != 0 {
		s.warnings = append(s.warnings, fmt.Sprintf("secrets file %s is readable by group or others (mode %#o); restrict it with: chmod 600 %s", file, fi.Mode().Perm(), file))
	}
	if s.file, err = parseFile(file, data); err != nil {
		return nil, err
	}
	return s, nil
}

// Lookup returns the value of the secret name and whether it is set.
func (s *Source) Lookup(name string) (string, bool) {
	if name == "" {
		return "", false
	}
	if v := s.env[EnvPrefix+name]; v != "" {
		return v, true
	}
	if norm := envName(name); norm != name {
		if v := s.env[EnvPrefix+norm]; v != "" {
			return v, true
		}
	}
	if v := s.file[name]; v != "" {
		return v, true
	}
	if v := s.env[name]; v != "" {
		return v, true
	}
	return "", false
}

// FileNames returns the names the secrets file defines, sorted.
func (s *Source) FileNames() []string {
	names := make([]string, 0, len(s.file))
	for k := range s.file {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// Warnings returns problems that did not stop NewSource, such as a secrets
// file that others can read. Callers log them at warn level.
func (s *Source) Warnings() []string { return slices.Clone(s.warnings) }

// envName turns a secret name into an environment variable name: upper
// case, anything but letters, digits and '_' replaced by '_'.
func envName(name string) string {
	b := []byte(strings.ToUpper(name))
	for i, c := range b {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}

func parseFile(path string, data []byte) (map[string]string, error) {
	var (
		m   map[string]string
		err error
	)
	switch strings.ToLower(filepath.Ext(path)) {
	case ".json":
		m, err = parseJSON(data)
	case ".yaml", ".yml":
		m, err = parseYAML(path, data)
	case ".env":
		m, err = parseDotenv(path, data)
	default:
		switch {
		case bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")):
			m, err = parseJSON(data)
		case looksDotenv(data):
			m, err = parseDotenv(path, data)
		default:
			m, err = parseYAML(path, data)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("secrets file %s: %w", path, err)
	}
	return m, nil
}

func parseJSON(data []byte) (map[string]string, error) {
	var raw map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // keep numbers as written: 0.10 stays "0.10"
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("want a JSON object of name to string: %w", err)
	}
	m := make(map[string]string, len(raw))
	for k, v := range raw {
		switch v := v.(type) {
		case string:
			m[k] = v
		case json.Number:
			m[k] = v.String()
		case bool:
			m[k] = strconv.FormatBool(v)
		default:
			return nil, fmt.Errorf("%s: want a string value, got %T", k, v)
		}
	}
	return m, nil
}

func parseYAML(path string, data []byte) (map[string]string, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("parse YAML: %w", err)
	}
	m := map[string]string{}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return m, nil // empty file
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d:%d: want a map of secret name to string", path, root.Line, root.Column)
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if v.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("%s:%d:%d: %s: want a string value", path, v.Line, v.Column, k.Value)
		}
		// The scalar's text as written: 0123 stays "0123", not 123.
		m[k.Value] = v.Value
	}
	return m, nil
}

// looksDotenv reports whether every meaningful line is NAME=value.
func looksDotenv(data []byte) bool {
	seen := false
	for line := range strings.SplitSeq(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, _, ok := strings.Cut(line, "=")
		if !ok || !validDotenvName(strings.TrimSpace(k)) {
			return false
		}
		seen = true
	}
	return seen
}

func validDotenvName(k string) bool {
	if k == "" {
		return false
	}
	for i, c := range k {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && (c >= '0' && c <= '9' || c == '.' || c == '-')) {
			return false
		}
	}
	return true
}

// parseDotenv reads NAME=value lines: blank lines and # comments are
// skipped, "export " is allowed, values may be double-quoted (with \n, \t,
// \" and \\ escapes), single-quoted (literal) or bare (an unquoted " #"
// starts a comment).
func parseDotenv(path string, data []byte) (map[string]string, error) {
	m := map[string]string{}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" || line[0] == '#' {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, v, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok || !validDotenvName(k) {
			return nil, fmt.Errorf("%s:%d: want NAME=value", path, i+1)
		}
		val, err := dotenvValue(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %s: %w", path, i+1, k, err)
		}
		m[k] = val
	}
	return m, nil
}

func dotenvValue(v string) (string, error) {
	switch {
	case v == "":
		return "", nil
	case v[0] == '\'':
		end := strings.IndexByte(v[1:], '\'')
		if end < 0 {
			return "", errors.New("unterminated single quote")
		}
		return v[1 : end+1], nil
	case v[0] == '"':
		var b strings.Builder
		for i := 1; i < len(v); i++ {
			c := v[i]
			switch {
			case c == '"':
				return b.String(), nil
			case c == '\\' && i+1 < len(v):
				i++
				switch v[i] {
				case 'n':
					b.WriteByte('\n')
				case 't':
					b.WriteByte('\t')
				case 'r':
					b.WriteByte('\r')
				default:
					b.WriteByte(v[i])
				}
			default:
				b.WriteByte(c)
			}
		}
		return "", errors.New("unterminated double quote")
	default:
		if i := strings.Index(v, " #"); i >= 0 {
			v = strings.TrimSpace(v[:i])
		}
		return v, nil
	}
}

// String describes the source without values.
func (s *Source) String() string {
	if s.path == "" {
		return "secrets from the environment"
	}
	return "secrets from the environment and " + strconv.Quote(s.path)
}
