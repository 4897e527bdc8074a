package playbook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	yaml "go.yaml.in/yaml/v4"
)

// The schema validator lives in test code only: linking it into the binary
// costs ~9 ms of package initialisation on every `runbook` start.

// ValidateSchema checks a playbook source (YAML) against Schema() for the
// step types registered now (import internal/steps/all first). It is a
// second opinion for editors and tests; Parse is the authority and its
// diagnostics are more precise.
func ValidateSchema(src []byte) error {
	l := newLoader("playbook", src)
	l.lines = strings.Split(string(src), "\n")
	doc := l.parseYAML()
	if doc == nil || !l.measure(doc) {
		return sortDiagnostics(l.diags)
	}
	root := doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	v, _ := l.Value(root, "")
	if len(l.diags) > 0 {
		return sortDiagnostics(l.diags)
	}
	inst, err := jsonRoundTrip(v)
	if err != nil {
		return err
	}
	raw, err := Schema()
	if err != nil {
		return err
	}
	sdoc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("read playbook schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(SchemaID, sdoc); err != nil {
		return fmt.Errorf("add playbook schema: %w", err)
	}
	sch, err := c.Compile(SchemaID)
	if err != nil {
		return fmt.Errorf("compile playbook schema: %w", err)
	}
	return sch.Validate(inst)
}

// jsonRoundTrip converts a YAML-decoded value to what encoding/json would
// produce, the form the validator expects.
func jsonRoundTrip(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("convert playbook to JSON: %w", err)
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}
