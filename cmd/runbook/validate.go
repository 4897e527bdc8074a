package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/runbook/runbook/internal/config"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/suggest"
)

var validateVerb = &verb{
	name:    "validate",
	summary: "check playbooks and print every problem with its position",
	run:     cmdValidate,
}

// validateFile is one file of `validate --output json`.
type validateFile struct {
	File  string `json:"file"`
	Valid bool   `json:"valid"`
	Steps int    `json:"steps"`
}

// validateDiag is one diagnostic of `validate --output json`. Line and
// column are 0 when the problem has no position (an unreadable file).
type validateDiag struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Path    string `json:"path"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
}

// validateReport is the document `validate --output json` prints.
type validateReport struct {
	Valid       bool           `json:"valid"`
	Files       []validateFile `json:"files"`
	Diagnostics []validateDiag `json:"diagnostics"`
}

// formatFlag is --format text|github.
type formatFlag struct{ github bool }

func (f *formatFlag) String() string {
	if f.github {
		return "github"
	}
	return "text"
}

func (f *formatFlag) Set(s string) error {
	switch s {
	case "text", "":
		f.github = false
	case "github":
		f.github = true
	default:
		return fmt.Errorf("want text or github, got %q", s)
	}
	return nil
}

func cmdValidate(_ context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name:    "validate",
		usage:   "FILE... [--output json | --format github]",
		summary: "Check playbooks: structure, step params, expressions and references.",
		details: `Every problem of every file is printed to stderr as file:line:col: path: message.
Each valid file prints "ok  FILE (N steps)". Exit 2 when any file is invalid.

--output json prints one document to stdout: {"valid", "files": [{"file",
"valid", "steps"}], "diagnostics": [{"file", "line", "column", "path",
"message", "hint"}]}. --format github prints each problem to stdout as a
GitHub Actions annotation (::error file=F,line=L,col=C::message).`,
	})
	out := addOutputFlag(fs, "text")
	format := &formatFlag{}
	fs.Var(format, "format", "diagnostic `format`: text or github (default text)")
	configFile := fs.String("config", "", "config `file` whose notification channels notify steps, and whose hosts ssh steps, must name (default ./runbook.yaml when it exists)")
	pos, err := parsePositional(fs, args, 1, -1, "the playbook FILE to validate")
	if err != nil {
		return err
	}
	if out.json && format.github {
		return usageErrorf("validate", "--output json and --format github cannot be combined")
	}
	cfg, err := knownConfig(a, *configFile)
	if err != nil {
		return err
	}
	report := validateReport{Valid: true, Files: []validateFile{}, Diagnostics: []validateDiag{}}
	bad := 0
	for _, file := range pos {
		pb, err := loadValidated(file, cfg)
		if err != nil {
			bad++
			report.Valid = false
			report.Files = append(report.Files, validateFile{File: file})
			diags := diagnosticsOf(file, err)
			report.Diagnostics = append(report.Diagnostics, diags...)
			switch {
			case out.json:
			case format.github:
				for _, d := range diags {
					fmt.Fprintln(a.stdout, githubAnnotation(d))
				}
			default:
				fmt.Fprintln(a.stderr, strings.TrimRight(err.Error(), "\n"))
			}
			continue
		}
		n := len(pb.Steps) + len(pb.OnFailure) + len(pb.Finally)
		report.Files = append(report.Files, validateFile{File: file, Valid: true, Steps: n})
		if out.json {
			continue
		}
		unit := "steps"
		if n == 1 {
			unit = "step"
		}
		fmt.Fprintf(a.stdout, "ok  %s (%d %s)\n", file, n, unit)
	}
	if out.json {
		if err := writeJSON(a.stdout, report); err != nil {
			return err
		}
	}
	if bad > 0 {
		what := "1 file is invalid"
		if bad > 1 {
			what = fmt.Sprintf("%d files are invalid", bad)
		}
		fmt.Fprintln(a.stderr, what)
		return &exitError{code: 2, err: fmt.Errorf("%s", what), quiet: true, hint: "runbook steps TYPE shows the params of a step type; runbook schema gives editors the JSON Schema"}
	}
	return nil
}

// diagnosticsOf turns a load error into diagnostics: one per problem of
// an invalid playbook, or one without a position for a file that could
// not be read.
func diagnosticsOf(file string, err error) []validateDiag {
	var ds playbook.Diagnostics
	if !errors.As(err, &ds) {
		return []validateDiag{{File: file, Message: err.Error()}}
	}
	out := make([]validateDiag, len(ds))
	for i, d := range ds {
		f := d.Pos.File
		if f == "" {
			f = file
		}
		msg, hint := splitHint(d.Message)
		out[i] = validateDiag{File: f, Line: d.Pos.Line, Column: d.Pos.Col, Path: d.Path, Message: msg, Hint: hint}
	}
	return out
}

// splitHint separates the did-you-mean suffix that the loader appends to a
// message (suggest.Hint's "; did you mean %q?"). The playbook package
// keeps it in the message so the text form reads as one line; machines get
// it apart.
func splitHint(msg string) (message, hint string) {
	if i := strings.LastIndex(msg, "; did you mean "); i >= 0 && strings.HasSuffix(msg, "?") {
		return msg[:i], msg[i+2:]
	}
	return msg, ""
}

// githubAnnotation formats d as a GitHub Actions workflow command, which
// the runner turns into an annotation on the file's line.
func githubAnnotation(d validateDiag) string {
	props := "file=" + escapeGitHubProperty(d.File)
	if d.Line > 0 {
		props += fmt.Sprintf(",line=%d", d.Line)
		if d.Column > 0 {
			props += fmt.Sprintf(",col=%d", d.Column)
		}
	}
	msg := d.Message
	if d.Path != "" {
		msg = d.Path + ": " + msg
	}
	if d.Hint != "" {
		msg += "; " + d.Hint
	}
	return "::error " + props + "::" + escapeGitHubData(msg)
}

// escapeGitHubData escapes a workflow command's message as the runner
// requires: % first, then CR and LF.
func escapeGitHubData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

// escapeGitHubProperty escapes a workflow command's property value, which
// additionally may not hold ':' or ','.
func escapeGitHubProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}

var _ flag.Value = (*formatFlag)(nil)

// knownConfig is the config validate checks notify and ssh steps against: --config,
// else ./runbook.yaml when it exists, else none (nil).
func knownConfig(a *app, file string) (*config.Config, error) {
	if file == "" {
		if _, err := os.Stat(config.DefaultFile); err != nil {
			return nil, nil
		}
		file = config.DefaultFile
	}
	cfg, err := config.Load(file)
	if err != nil {
		return nil, configError(a, file, err)
	}
	return cfg, nil
}

// loadValidated loads a playbook and, when the config is known, checks
// that its notify steps name a channel of it and its ssh steps a host of
// it: each literal channel that notifications.channels lacks is a
// diagnostic at the step's with.channel, each host or jump that hosts:
// lacks one at the step's with.host or with.jump.
func loadValidated(file string, cfg *config.Config) (*playbook.Playbook, error) {
	pb, err := loadPlaybook(file)
	if err != nil || cfg == nil {
		return pb, err
	}
	var ds playbook.Diagnostics
	known := slices.Sorted(maps.Keys(cfg.Notifications.Channels))
	for _, list := range [][]*playbook.Step{pb.Steps, pb.OnFailure, pb.Finally} {
		for _, s := range list {
			v, ok := s.With["channel"]
			if s.Uses != "notify" || !ok || !v.Literal() {
				continue
			}
			name, _ := v.Eval(nil)
			if _, found := cfg.Notifications.Channels[fmt.Sprint(name)]; found {
				continue
			}
			msg := fmt.Sprintf("channel %q is not in notifications.channels of %s", name, cfg.File)
			if len(known) > 0 {
				msg += " (channels: " + strings.Join(known, ", ") + ")" + suggest.Hint(fmt.Sprint(name), known)
			}
			ds = append(ds, playbook.Diagnostic{Pos: s.ParamPos("channel"), Path: s.DiagPath + ".with.channel", Message: msg})
		}
	}
	ds = append(ds, hostDiagnostics(pb, cfg)...)
	if len(ds) > 0 {
		return nil, ds
	}
	return pb, nil
}
