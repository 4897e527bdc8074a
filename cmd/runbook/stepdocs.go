package main

// stepdocs.go writes docs/steps: one Markdown page per step family (the Go
// package under internal/steps that registers the type), every type with
// its params, constraints, outputs and an example that loads. It reads the
// registry only, like `runbook schema`, so the pages cannot drift from the
// code without TestStepDocsAreCurrent noticing.

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"go.yaml.in/yaml/v4"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/steps"
)

// stepDocsCommand is what regenerates the pages; the stale-docs test names it.
const stepDocsCommand = "make docs (runbook steps --markdown docs/steps)"

// stepFamily is the last element of the Go package that registered d
// (core, nks, easymaker, ...).
func stepFamily(d *steps.Descriptor) string {
	if d.Package == "" {
		return "other"
	}
	return path.Base(d.Package)
}

// stepDocs renders every page: file name -> content.
func stepDocs() (map[string][]byte, error) {
	byFamily := map[string][]*steps.Descriptor{}
	for _, d := range steps.All() {
		f := stepFamily(d)
		byFamily[f] = append(byFamily[f], d)
	}
	families := make([]string, 0, len(byFamily))
	for f := range byFamily {
		families = append(families, f)
	}
	sort.Strings(families)

	pages := map[string][]byte{}
	var index bytes.Buffer
	index.WriteString(generatedNote)
	index.WriteString("# Step types\n\n")
	index.WriteString("Every type a playbook step can `uses:`, by family. `runbook steps TYPE` prints the same on a terminal.\n")
	index.WriteString("The language around the steps (inputs, `needs`, `retry`, expressions, triggers) is in [../playbooks.md](../playbooks.md).\n\n")
	for _, fam := range families {
		var b bytes.Buffer
		b.WriteString(generatedNote)
		fmt.Fprintf(&b, "# %s steps\n\n", fam)
		fmt.Fprintf(&index, "## [%s](%s.md)\n\n", fam, fam)
		for _, d := range byFamily[fam] {
			fmt.Fprintf(&b, "- [`%s`](#%s)\n", d.Type, anchor(d.Type))
			fmt.Fprintf(&index, "- [`%s`](%s.md#%s): %s\n", d.Type, fam, anchor(d.Type), firstSentence(d.Summary))
		}
		b.WriteString("\n")
		index.WriteString("\n")
		for _, d := range byFamily[fam] {
			if err := writeStepDoc(&b, d); err != nil {
				return nil, err
			}
		}
		pages[fam+".md"] = bytes.TrimRight(b.Bytes(), "\n")
		pages[fam+".md"] = append(pages[fam+".md"], '\n')
	}
	pages["README.md"] = append(bytes.TrimRight(index.Bytes(), "\n"), '\n')
	return pages, nil
}

const generatedNote = "<!-- Generated from the step registry by `" + stepDocsCommand + "`. Do not edit. -->\n\n"

var anchorStrip = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^a-z0-9_ -]`) })

// anchor is GitHub's heading anchor of a type name: dots dropped.
func anchor(s string) string {
	return strings.ReplaceAll(anchorStrip().ReplaceAllString(strings.ToLower(s), ""), " ", "-")
}

func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}

func writeStepDoc(b *bytes.Buffer, d *steps.Descriptor) error {
	fmt.Fprintf(b, "## %s\n\n%s\n\n", d.Type, d.Summary)
	if d.Mutating {
		b.WriteString("**Mutating.** An intent is recorded before each call; a resumed run reconciles (finds what an interrupted attempt created) instead of repeating it.\n\n")
	}
	if d.Idempotent {
		fmt.Fprintf(b, "**Idempotent.** Running it again changes nothing, so its start is not written before it runs: "+
			"it is on record with its end, in the run's next write (one commit fewer), unless an attempt runs for %s "+
			"or waits to be tried again. A run interrupted before that write runs it again when resumed.\n\n", engine.ShownAfter)
	}
	schema := d.ParamsSchema()
	rows := paramRows("", schema)
	b.WriteString("### Params\n\n")
	switch {
	case len(rows) > 0:
		b.WriteString("| Name | Type | Required | Default | Constraints | Description |\n|---|---|---|---|---|---|\n")
		for _, p := range rows {
			req := ""
			if p.Required {
				req = "yes"
			}
			def := ""
			if p.Default != nil {
				def = "`" + compactJSON(p.Default) + "`"
			}
			cons := make([]string, len(p.Constraints))
			for i, c := range p.Constraints {
				cons[i] = "`" + c + "`"
			}
			fmt.Fprintf(b, "| `%s` | %s | %s | %s | %s | %s |\n", p.Name, cell(p.Type), req, cell(def), cell(strings.Join(cons, ", ")), cell(p.Description))
		}
		if d.OpenParams {
			b.WriteString("\nOther keys are accepted and passed to the step.\n")
		}
	case d.OutputsFromWith || d.OpenParams:
		b.WriteString("Any keys.\n")
	default:
		b.WriteString("None.\n")
	}
	b.WriteString("\nA value may be an expression (`${{ inputs.x }}`) wherever a literal is accepted; literal values are checked when the playbook loads, expression values again before the step runs.\n\n")

	b.WriteString("### Outputs\n\n")
	switch {
	case d.OutputsFromWith:
		b.WriteString("One per key of `with`.\n")
	case len(d.Outputs) == 0 && !d.OpenOutputs:
		b.WriteString("None.\n")
	default:
		b.WriteString("| Name | Type | Description |\n|---|---|---|\n")
		for _, o := range d.Outputs {
			fmt.Fprintf(b, "| `%s` | %s | %s |\n", o.Name, cell(o.Type), cell(o.Description))
		}
		if d.OpenOutputs {
			b.WriteString("\nMore outputs are known only at run time.\n")
		}
	}
	if len(d.SecretOutputs) > 0 {
		fmt.Fprintf(b, "\nSecret (masked in the state file, logs and later steps): `%s`.\n", strings.Join(d.SecretOutputs, "`, `"))
	}
	ex, err := stepExample(d)
	if err != nil {
		return err
	}
	fmt.Fprintf(b, "\n### Example\n\n```yaml\n%s```\n\n", ex)
	return nil
}

// cell makes text safe inside a Markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.Join(strings.Fields(s), " ")
}

// stepExample is a one-step playbook using d with its registered Example
// (the valid params the contract suite runs), checked to load.
func stepExample(d *steps.Descriptor) (string, error) {
	if d.Example == nil {
		return "", fmt.Errorf("%s has no Example", d.Type)
	}
	var order []string
	for _, name := range d.ParamNames() {
		if _, ok := d.Example[name]; ok {
			order = append(order, name)
		}
	}
	var extra []string
	for name := range d.Example {
		if !slices.Contains(order, name) {
			extra = append(extra, name)
		}
	}
	sort.Strings(extra)
	order = append(order, extra...)
	src := renderExample(d, d.Example, order)
	if _, err := playbook.Parse("example.yaml", []byte(src), playbook.LoadOptions{}); err != nil {
		return "", fmt.Errorf("%s: its Example does not load: %w", d.Type, err)
	}
	return src, nil
}

// isCollection reports a map or list value, which YAML writes as a block.
func isCollection(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return true
	}
	return false
}

func renderExample(d *steps.Descriptor, with map[string]any, order []string) string {
	var b strings.Builder
	b.WriteString("version: 1\n")
	fmt.Fprintf(&b, "name: example-%s\n", strings.ReplaceAll(strings.ReplaceAll(d.Type, ".", "-"), "_", "-"))
	id := d.Type[strings.LastIndex(d.Type, ".")+1:]
	fmt.Fprintf(&b, "steps:\n  - id: %s\n    uses: %s\n", id, d.Type)
	if len(order) > 0 {
		b.WriteString("    with:\n")
		for _, name := range order {
			v, err := yaml.Marshal(with[name])
			if err != nil {
				v = []byte(fmt.Sprintf("%q\n", fmt.Sprint(with[name])))
			}
			text := strings.TrimRight(string(v), "\n")
			if strings.Contains(text, "\n") || isCollection(with[name]) && text != "{}" && text != "[]" {
				fmt.Fprintf(&b, "      %s:\n", name)
				for _, line := range strings.Split(text, "\n") {
					fmt.Fprintf(&b, "        %s\n", line)
				}
				continue
			}
			fmt.Fprintf(&b, "      %s: %s\n", name, text)
		}
	}
	return b.String()
}

// sampleStrings are tried, in order, against a string param's pattern.
var sampleStrings = []string{
	"v1.31.4", "10.100.0.0/16", "192.168.0.10", "kr1", "m2.c4m8", "30s", "https://example.com/hook",
	"00000000-0000-0000-0000-000000000001", "example", "a",
}

func exampleString(name string, s map[string]any) string {
	lo, _ := asInt64(s["minLength"])
	hi, hasHi := asInt64(s["maxLength"])
	fits := func(v string) bool {
		n := int64(utf8.RuneCountInString(v))
		return n >= lo && (!hasHi || n <= hi)
	}
	if f, _ := s["format"].(string); f == "uri" {
		return "https://example.com/hook"
	}
	candidates := append([]string{"my-" + strings.ReplaceAll(name, "_", "-")}, sampleStrings...)
	if p, ok := s["pattern"].(string); ok {
		re, err := regexp.Compile(p)
		if err == nil {
			for _, c := range candidates {
				if re.MatchString(c) && fits(c) {
					return c
				}
			}
		}
		return "example"
	}
	for _, c := range candidates {
		if fits(c) {
			return c
		}
	}
	return strings.Repeat("x", int(lo))
}

// writeStepDocsDir replaces the generated pages in dir (and removes pages of
// families that no longer exist).
func writeStepDocsDir(dir string) error {
	pages, err := stepDocs()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(dir, "*.md"))
	for _, f := range old {
		if _, keep := pages[filepath.Base(f)]; !keep {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	for name, b := range pages {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
