package playtest

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// WriteCase prints one result like `go test -v`: a PASS or FAIL line with
// the duration, then each failure, indented, at its file:line:col.
func WriteCase(w io.Writer, r *Result) {
	verdict := "PASS"
	if !r.Passed {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "--- %s: %s (%.2fs)\n", verdict, r.Name(), r.Duration.Seconds())
	for _, f := range r.Failures {
		fmt.Fprintf(w, "    %s\n", indent(f.String()))
	}
}

// WriteSummary prints the closing line: ok or FAIL, with the counts.
func WriteSummary(w io.Writer, results []*Result, invalid int, took time.Duration) {
	failed := 0
	for _, r := range results {
		if !r.Passed {
			failed++
		}
	}
	verdict := "ok"
	if failed > 0 || invalid > 0 {
		verdict = "FAIL"
	}
	line := fmt.Sprintf("%s\t%d passed, %d failed", verdict, len(results)-failed, failed)
	if invalid > 0 {
		line += fmt.Sprintf(", %d invalid test files", invalid)
	}
	fmt.Fprintf(w, "%s\t(%.2fs)\n", line, took.Seconds())
}

func indent(s string) string { return strings.ReplaceAll(s, "\n", "\n    ") }

// Report is the document --output json prints.
type Report struct {
	Passed   bool             `json:"passed"`
	Cases    []CaseReport     `json:"cases"`
	Invalid  []DiagnosticJSON `json:"invalid"`
	Summary  SummaryJSON      `json:"summary"`
	Coverage []*PlaybookCover `json:"coverage,omitempty"`
}

// SummaryJSON counts the cases.
type SummaryJSON struct {
	Cases      int   `json:"cases"`
	Passed     int   `json:"passed"`
	Failed     int   `json:"failed"`
	DurationMS int64 `json:"duration_ms"`
}

// CaseReport is one case of the JSON report.
type CaseReport struct {
	Name       string           `json:"name"`
	File       string           `json:"file"`
	Line       int              `json:"line"`
	Column     int              `json:"column"`
	Case       string           `json:"case"`
	Playbook   string           `json:"playbook"`
	Passed     bool             `json:"passed"`
	DurationMS int64            `json:"duration_ms"`
	Runs       []RunJSON        `json:"runs"`
	Failures   []DiagnosticJSON `json:"failures"`
}

// RunJSON is one run of a case.
type RunJSON struct {
	ID     string `json:"id,omitempty"`
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
}

// DiagnosticJSON is a failure or a diagnostic with its position.
type DiagnosticJSON struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Path    string `json:"path"`
	Message string `json:"message"`
}

// NewReport builds the JSON report.
func NewReport(results []*Result, invalid []DiagnosticJSON, took time.Duration) *Report {
	rep := &Report{Cases: []CaseReport{}, Invalid: invalid}
	if rep.Invalid == nil {
		rep.Invalid = []DiagnosticJSON{}
	}
	for _, r := range results {
		cr := CaseReport{
			Name: r.Name(), File: r.File, Line: r.Case.Pos.Line, Column: r.Case.Pos.Col, Case: r.Case.Name,
			Passed: r.Passed, DurationMS: r.Duration.Milliseconds(), Runs: []RunJSON{}, Failures: []DiagnosticJSON{},
		}
		if r.Playbook != nil {
			cr.Playbook = r.Playbook.Name
		}
		for _, t := range r.Runs {
			rj := RunJSON{ID: t.ID, Status: t.Status}
			if t.Error != nil {
				rj.Error = t.Error.Message
			}
			cr.Runs = append(cr.Runs, rj)
		}
		for _, f := range r.Failures {
			cr.Failures = append(cr.Failures, DiagnosticJSON{File: f.Pos.File, Line: f.Pos.Line, Column: f.Pos.Col, Path: f.Path, Message: f.Message})
		}
		rep.Cases = append(rep.Cases, cr)
		rep.Summary.Cases++
		if r.Passed {
			rep.Summary.Passed++
		} else {
			rep.Summary.Failed++
		}
	}
	rep.Summary.DurationMS = took.Milliseconds()
	rep.Passed = rep.Summary.Failed == 0 && len(rep.Invalid) == 0
	return rep
}

// WriteJSON writes the report, indented.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(rep)
}

// JUnit XML, as CI systems read it (Jenkins, GitLab, GitHub actions that
// publish test reports): one testsuite per test file, one testcase per
// case, a failure element per failed case, an error testcase per invalid
// file.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	File      string        `xml:"file,attr,omitempty"`
	Line      int           `xml:"line,attr,omitempty"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes results (and invalid files, as errors) as JUnit XML.
func WriteJUnit(w io.Writer, results []*Result, invalid map[string]error, took time.Duration) error {
	doc := junitSuites{Time: seconds(took)}
	byFile := map[string]int{}
	for _, r := range results {
		i, ok := byFile[r.File]
		if !ok {
			i = len(doc.Suites)
			byFile[r.File] = i
			doc.Suites = append(doc.Suites, junitSuite{Name: r.File})
		}
		s := &doc.Suites[i]
		class := strings.TrimSuffix(filepath.Base(r.File), Suffix)
		jc := junitCase{Name: r.Case.Name, ClassName: class, File: r.File, Line: r.Case.Pos.Line, Time: seconds(r.Duration)}
		if !r.Passed {
			lines := make([]string, len(r.Failures))
			for j, f := range r.Failures {
				lines[j] = f.String()
			}
			msg := ""
			if len(r.Failures) > 0 {
				msg = r.Failures[0].String()
			}
			jc.Failure = &junitProblem{Message: msg, Type: "expectation", Text: strings.Join(lines, "\n")}
			s.Failures++
			doc.Failures++
		}
		s.Tests++
		doc.Tests++
		s.Cases = append(s.Cases, jc)
		s.Time = addSeconds(s.Time, r.Duration)
	}
	for file, err := range sortedErrors(invalid) {
		doc.Suites = append(doc.Suites, junitSuite{Name: file, Tests: 1, Errors: 1, Time: "0.000", Cases: []junitCase{{
			Name: "load", ClassName: strings.TrimSuffix(filepath.Base(file), Suffix), File: file, Time: "0.000",
			Error: &junitProblem{Message: "invalid test file", Type: "invalid", Text: err.Error()},
		}}})
		doc.Tests++
		doc.Errors++
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

func addSeconds(s string, d time.Duration) string {
	var f float64
	fmt.Sscanf(s, "%f", &f)
	return fmt.Sprintf("%.3f", f+d.Seconds())
}

// sortedErrors iterates m by key.
func sortedErrors(m map[string]error) func(func(string, error) bool) {
	return func(yield func(string, error) bool) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if !yield(k, m[k]) {
				return
			}
		}
	}
}
