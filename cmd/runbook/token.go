package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/auth"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/suggest"
)

var tokenVerb = &verb{
	name:    "token",
	summary: "create, list and revoke API tokens",
	run:     cmdToken,
}

func cmdToken(ctx context.Context, a *app, args []string) error {
	return dispatchSub(ctx, a, "token",
		`API tokens let people and programs use the API of runbook serve with roles
(viewer, operator, approver, admin), optionally on some playbooks only. The
state keeps only a token's SHA-256: a token is shown once, when it is created.
When runbook serve holds the state (or --server URL, $RUNBOOK_SERVER names
one) the commands go through its API with the admin token in the secret
RUNBOOK_API_TOKEN (environment or secrets file): a person's or the server's.
Otherwise they change the state file or database directly.`,
		[]subVerb{
			{"create", "create a token and print it once", cmdTokenCreate},
			{"list", "list tokens (never their secret)", cmdTokenList},
			{"revoke", "revoke a token at once", cmdTokenRevoke},
		}, args)
}

// listFlag is a comma-separated, repeatable flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

// checkTokenRequest refuses what the server would refuse, before asking
// it: a bad name, an unknown role (with the closest one), a bad pattern.
func checkTokenRequest(fs *flag.FlagSet, req api.TokenRequest) error {
	if err := auth.CheckName(req.Name); err != nil {
		return &exitError{code: 2, err: err, hint: "runbook " + fs.Name() + " -h"}
	}
	if len(req.Roles) == 0 {
		return &exitError{code: 2, err: fmt.Errorf("--role is required (%s)", strings.Join(auth.RoleNames(), ", ")),
			hint: "runbook token create " + req.Name + " --role viewer"}
	}
	for _, r := range req.Roles {
		if _, ok := auth.RolePermissions[r]; !ok {
			want := suggest.Closest(r, auth.RoleNames())
			if want == "" {
				want = auth.RoleViewer
			}
			return &exitError{code: 2, err: fmt.Errorf("unknown role %q (want %s)%s", r, strings.Join(auth.RoleNames(), ", "), suggest.Hint(r, auth.RoleNames())),
				hint: "runbook token create " + req.Name + " --role " + want}
		}
	}
	if err := auth.CheckPatterns(req.Playbooks); err != nil {
		return &exitError{code: 2, err: fmt.Errorf("--playbooks: %w", err), hint: `runbook token create ` + req.Name + ` --role operator --playbooks "nks-*"`}
	}
	if _, err := auth.ParseTTL(req.TTL); err != nil {
		return &exitError{code: 2, err: fmt.Errorf("--%w", err), hint: "runbook token create " + req.Name + " --role viewer --ttl 90d"}
	}
	return nil
}

func cmdTokenCreate(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name: "token create", usage: "NAME --role ROLE[,ROLE] [--playbooks PATTERN[,PATTERN]] [--ttl DURATION]",
		summary: "Create an API token and print it, alone on the last line of the output. It is not shown again: only its SHA-256 is kept.",
		details: `Roles: viewer (read playbooks and runs), operator (also start, cancel, retry and
resume runs), approver (also answer approvals), admin (everything, also tokens,
reload and the audit log), agent (a runbook agent: register and run the step
attempts assigned to it, nothing else; --labels limits the labels it may
claim; docs/agents.md). --playbooks limits the roles to the playbooks whose
name matches a pattern (path.Match: "nks-*"); such a token never gets admin's
global permissions. --ttl ends the token after that long (90d, 12h): a request
with it afterwards is refused with 401, naming the expiry. Use the token as a bearer token, or with the CLI:
  export RUNBOOK_API_TOKEN=$(runbook token create ci --role operator | tail -n 1)`,
	})
	var roles, playbooks listFlag
	fs.Var(&roles, "role", "the token's `roles`, comma separated or repeated (viewer, operator, approver, admin, agent)")
	fs.Var(&playbooks, "playbooks", "limit the roles to playbooks matching these `patterns` (comma separated or repeated)")
	ttl := fs.String("ttl", "", "end the token after this `duration` (90d, 12h; default: never)")
	var labels listFlag
	fs.Var(&labels, "labels", "for --role agent: the `labels` (KEY=VALUE, the value may be a pattern) the agent may claim; the same as --playbooks label:KEY=VALUE")
	o := newRunsOpener(a, fs)
	pos, err := parsePositional(fs, args, 1, 1, "the token NAME")
	if err != nil {
		return err
	}
	for _, l := range labels {
		playbooks = append(playbooks, "label:"+l)
	}
	req := api.TokenRequest{Name: pos[0], Roles: roles, Playbooks: playbooks, TTL: *ttl}
	if err := checkTokenRequest(fs, req); err != nil {
		return err
	}
	b, err := openAuth(ctx, o, true)
	if err != nil {
		return err
	}
	defer b.close()
	created, err := b.createToken(ctx, req)
	if err != nil {
		return tokenError(err, "runbook token list")
	}
	a.redactor.Add(created.Secret)
	scope := "every playbook"
	if len(created.Playbooks) > 0 {
		scope = "playbooks " + strings.Join(created.Playbooks, ", ")
	}
	until := ""
	if !created.ExpiresAt.IsZero() {
		until = ", until " + formatTime(created.ExpiresAt)
	}
	fmt.Fprintf(a.stdout, "token %s created: %s on %s%s.\n", created.Name, strings.Join(created.Roles, ", "), scope, until)
	fmt.Fprintln(a.stdout, "Keep it now, it is not shown again (runbook token revoke "+created.Name+" ends it):")
	fmt.Fprintln(a.stdout, created.Secret)
	return nil
}

func cmdTokenList(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name: "token list", usage: "[--output json]",
		summary: "List the API tokens made with 'runbook token create', revoked ones included. Never a token or its hash.",
		details: "Users of the config (auth.users) and the server token are not listed: the config names them.",
	})
	out := addOutputFlag(fs, "text")
	o := newRunsOpener(a, fs)
	_, err := parsePositional(fs, args, 0, 0, "")
	if err != nil {
		return err
	}
	b, err := openAuth(ctx, o, false)
	if err != nil {
		return err
	}
	toks := []api.Token{}
	if b != nil {
		defer b.close()
		if toks, err = b.tokens(ctx); err != nil {
			return tokenError(err, "")
		}
	}
	if out.json {
		return writeJSON(a.stdout, toks)
	}
	if len(toks) == 0 {
		fmt.Fprintln(a.stdout, "no tokens")
		return nil
	}
	tw := newTable(a.stdout, 2)
	tw.row("NAME", "ROLES", "PLAYBOOKS", "CREATED", "BY", "EXPIRES", "LAST USED", "STATUS")
	now := time.Now()
	for _, t := range toks {
		status := "live"
		switch {
		case !t.RevokedAt.IsZero():
			status = "revoked " + formatTime(t.RevokedAt)
			if t.RevokedBy != "" {
				status += " by " + t.RevokedBy
			}
		case !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt):
			status = "expired"
		}
		expires, used := "never", "never"
		if !t.ExpiresAt.IsZero() {
			expires = formatTime(t.ExpiresAt)
		}
		if !t.LastUsedAt.IsZero() {
			used = formatTime(t.LastUsedAt)
		}
		tw.row(t.Name, strings.Join(t.Roles, ","), orDash(strings.Join(t.Playbooks, ",")), formatTime(t.CreatedAt), orDash(t.CreatedBy), expires, used, status)
	}
	return tw.flush()
}

func cmdTokenRevoke(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name: "token revoke", usage: "NAME",
		summary: "Revoke an API token: from now on the server answers it with 401. Its name may be used again.",
	})
	o := newRunsOpener(a, fs)
	pos, err := parsePositional(fs, args, 1, 1, "the token NAME (runbook token list shows them)")
	if err != nil {
		return err
	}
	name := pos[0]
	b, err := openAuth(ctx, o, false)
	if err != nil {
		return err
	}
	if b == nil {
		return &exitError{code: 1, err: fmt.Errorf("no live token %q: the state file does not exist yet", name), hint: "runbook token list --state PATH"}
	}
	defer b.close()
	if err := b.revokeToken(ctx, name); err != nil {
		return tokenError(err, "runbook token list")
	}
	fmt.Fprintf(a.stdout, "token %s revoked\n", name)
	return nil
}

// tokenError gives a refusal of the token and audit verbs its hint: a 403
// names the permission lacked; the verbs need an admin token.
func tokenError(err error, hint string) error {
	if fault.CodeOf(err) == fault.Unauthorized {
		hint = "use an admin token: export RUNBOOK_API_TOKEN=TOKEN (yours, or the server's)"
	}
	return withHint(err, hint)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
