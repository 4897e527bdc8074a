package main

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/runbook/runbook/internal/state"
)

var versionVerb = &verb{
	name:    "version",
	summary: "print the version, commit, Go version and state format",
	run:     cmdVersion,
	instant: true,
}

// The release build stamps these (Makefile, -ldflags -X): the version
// from git describe, the commit and the commit's time, so that two builds
// of one commit are the same bytes. A plain go build leaves them empty and
// the module's build information is used instead.
var (
	version    string
	commit     string
	commitDate string
)

// versionInfo is what `runbook version` prints.
type versionInfo struct {
	Version     string `json:"version"`               // git describe (v1.2.3, v1.2.3-4-gabcdef0, ...-dirty); "(devel)" for a plain source build
	Commit      string `json:"commit,omitempty"`      // VCS revision the binary was built from
	Modified    bool   `json:"modified,omitempty"`    // built from a work tree with uncommitted changes
	CommitDate  string `json:"commit_date,omitempty"` // the commit's time (RFC 3339, UTC), not the build's
	Go          string `json:"go"`
	Platform    string `json:"platform"`
	StateFormat int    `json:"state_format"`
}

func buildVersion() versionInfo {
	v := versionInfo{Version: "(unknown)", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH, StateFormat: state.FormatVersion}
	if version != "" {
		v.Version, v.Commit, v.CommitDate = version, commit, commitDate
		v.Modified = strings.HasSuffix(version, "-dirty")
		return v
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.Version = bi.Main.Version
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.CommitDate = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// unstamped is the commit line of a binary that knows none: go build in
// a git clone records the commit (Go's VCS stamping), make build stamps it
// with ldflags; go run, -buildvcs=false and a linked git worktree (Go
// looks for a .git directory) leave it out.
const unstamped = "unknown (built without VCS information: go run, -buildvcs=false, or a git worktree; go build in a clone or make build records it)"

func cmdVersion(_ context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name:    "version",
		usage:   "[--json | --output text|json]",
		summary: "Print runbook's version, the commit it was built from and that commit's date, its Go version and platform, and the state file format it writes.",
	})
	out := addOutputFlag(fs, "text")
	fs.BoolFunc("json", "the same as --output json", func(string) error { return out.Set("json") })
	_, err := parsePositional(fs, args, 0, 0, "")
	if err != nil {
		return err
	}
	v := buildVersion()
	if out.json {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	c := v.Commit
	if c == "" {
		c = unstamped
	} else if v.Modified {
		c += " (modified)"
	}
	fmt.Fprintf(a.stdout, "runbook %s\ncommit:       %s\n", v.Version, c)
	if v.CommitDate != "" {
		fmt.Fprintf(a.stdout, "commit date:  %s\n", v.CommitDate)
	}
	fmt.Fprintf(a.stdout, "go:           %s %s\nstate format: %d\n", v.Go, v.Platform, v.StateFormat)
	return nil
}
