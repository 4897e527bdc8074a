package main

import (
	"context"
	"net/url"

	"github.com/runbook/runbook/internal/state"
)

// recorded is the simulator URL a run started with these flags records
// (state.Run.Sim): the --sim-url without its user and password; empty for
// --sim (the embedded simulators end with the process) and for real
// services.
func (f *simFlags) recorded() string {
	if f.url == "" {
		return ""
	}
	u, err := url.Parse(f.url)
	if err != nil || u.Host == "" {
		return ""
	}
	u.User = nil
	return u.String()
}

// given reports whether --sim or --sim-url was given.
func (f *simFlags) given() bool { return f.embedded || f.url != "" }

// remember points the flags at the simulator run r (or the run at the root
// of its sub-playbook tree) was started against, when neither --sim nor
// --sim-url was given: an approval, a resume or a retry reaches the
// resources the run created. Flags given on the command line win.
func (f *simFlags) remember(ctx context.Context, store state.Store, runID string) {
	if f.given() {
		return
	}
	r, err := store.GetRun(ctx, runID)
	if err != nil {
		return
	}
	if root := rootRun(ctx, store.GetRun, r); root.Sim != "" {
		f.url = root.Sim
		f.fromRun = root.ID
	}
}
