package main

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/runbook/runbook/internal/state"
)

var versionVerb = &verb{
	name:    "version",
	summary: "print the version, commit, Go version and state format",
	run:     cmdVersion,
}

// versionInfo is what `runbook version` prints.
type versionInfo struct {
	Version     string `json:"version"`          // module version ("(devel)" for a source build)
	Commit      string `json:"commit,omitempty"` // VCS revision the binary was built from
	Modified    bool   `json:"modified,omitempty"`
	BuiltAt     string `json:"built_at,omitempty"` // commit time
	Go          string `json:"go"`
	Platform    string `json:"platform"`
	StateFormat int    `json:"state_format"`
}

func buildVersion() versionInfo {
	v := versionInfo{Version: "(unknown)", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH, StateFormat: state.FormatVersion}
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
			v.BuiltAt = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func cmdVersion(_ context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name:    "version",
		usage:   "[--output text|json]",
		summary: "Print runbook's version, the commit it was built from, its Go version and the state file format it writes.",
	})
	out := addOutputFlag(fs, "text")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, 0, 0, ""); err != nil {
		return err
	}
	v := buildVersion()
	if out.json {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	commit := v.Commit
	if commit == "" {
		commit = "unknown"
	} else if v.Modified {
		commit += " (modified)"
	}
	fmt.Fprintf(a.stdout, "runbook %s\ncommit:       %s\n", v.Version, commit)
	if v.BuiltAt != "" {
		fmt.Fprintf(a.stdout, "commit time:  %s\n", v.BuiltAt)
	}
	fmt.Fprintf(a.stdout, "go:           %s %s\nstate format: %d\n", v.Go, v.Platform, v.StateFormat)
	return nil
}
