package ui

import (
	"context"
	"errors"
	"path"
	"slices"
)

// Action is something a user may be allowed to do. Reading is allowed to
// everyone signed in; every action below changes something. The names are
// the API's permissions.
type Action string

// The actions the UI offers.
const (
	StartRun   Action = "runs.start"
	CancelRun  Action = "runs.cancel"
	RetryRun   Action = "runs.retry"
	ResumeRun  Action = "runs.resume"
	ApproveRun Action = "runs.approve"
	Reload     Action = "server.reload"
	// PauseSchedules pauses and resumes schedules.
	PauseSchedules Action = "schedules.pause"
	// PauseRuns pauses and resumes the runs of playbooks.
	PauseRuns Action = "runs.pause"
	// Admin drains the server (and whatever else needs no narrower
	// permission).
	Admin Action = "server.admin"
)

// Actions lists every Action.
var Actions = []Action{StartRun, CancelRun, RetryRun, ResumeRun, ApproveRun, Reload, PauseSchedules, PauseRuns, Admin}

// Grant allows some actions, on the playbooks whose names match one of
// Playbooks (path.Match patterns), or on every playbook and on actions
// about none (a reload) when Playbooks is empty.
type Grant struct {
	Actions   []Action
	Playbooks []string
}

func (g Grant) covers(pb string) bool {
	if len(g.Playbooks) == 0 {
		return true
	}
	for _, p := range g.Playbooks {
		if ok, _ := path.Match(p, pb); ok && pb != "" {
			return true
		}
	}
	return false
}

// Permissions is what an identity may do. The server judges them with
// its own rules (roles, playbook patterns, labels); Grants is a plain set
// of them.
type Permissions interface {
	// Allows reports whether action a is allowed on playbook pb ("" for an
	// action on no playbook, such as a reload).
	Allows(a Action, pb string) bool
	// AllowsAny reports whether a is allowed on some playbook.
	AllowsAny(a Action) bool
}

// Grants are permissions as a list of grants: their union.
type Grants []Grant

var _ Permissions = Grants(nil)

// AllPermissions may do everything.
func AllPermissions() Grants { return Grants{{Actions: slices.Clone(Actions)}} }

// Allows implements Permissions.
func (gs Grants) Allows(a Action, pb string) bool {
	for _, g := range gs {
		if slices.Contains(g.Actions, a) && g.covers(pb) {
			return true
		}
	}
	return false
}

// AllowsAny implements Permissions.
func (gs Grants) AllowsAny(a Action) bool {
	for _, g := range gs {
		if slices.Contains(g.Actions, a) {
			return true
		}
	}
	return false
}

// Identity is who a token belongs to.
type Identity struct {
	// Name is who the token names; empty when it names no one: the name
	// given at login is then recorded as who answers and cancels, as `by`
	// is with the API.
	Name string
	// Perms is what the identity may do; nil: nothing but read.
	Perms Permissions
}

// allows reports whether id may do a on pb.
func (id Identity) allows(a Action, pb string) bool { return id.Perms != nil && id.Perms.Allows(a, pb) }

// allowsAny reports whether id may do a on some playbook.
func (id Identity) allowsAny(a Action) bool { return id.Perms != nil && id.Perms.AllowsAny(a) }

// IdentifyFunc returns the identity of an API token. It returns
// ErrBadToken for a token the API would refuse, and another error when
// no token can be checked (the API is disabled).
type IdentifyFunc func(ctx context.Context, token string) (Identity, error)

// ErrBadToken: the token is not one the API accepts.
var ErrBadToken = errors.New("this token is not valid for this server")

// Source is what a session's identity is checked against, kept in the
// session store: never a secret.
type Source struct {
	// Kind is SourceToken (TokenHash is the SHA-256, hex, of the API token
	// signed in with) or SourceOIDC (Name and Roles as the issuer's ID
	// token gave them).
	Kind      string
	TokenHash string
	// Name is the name given at sign-in (a token) or the OIDC identity's.
	Name  string
	Roles []string
}

// The kinds of Source.
const (
	SourceToken = "token"
	SourceOIDC  = "oidc"
)

type sourceKey struct{}

// WithSource returns ctx with the session source the UI calls the API as.
// Only code of this process can set it: a request from the network never
// carries it.
func WithSource(ctx context.Context, src Source) context.Context {
	return context.WithValue(ctx, sourceKey{}, src)
}

// SourceOf returns the session source of an in-process call of the UI.
func SourceOf(ctx context.Context) (Source, bool) {
	src, ok := ctx.Value(sourceKey{}).(Source)
	return src, ok
}

// RecheckFunc returns the identity of a session's source now: ErrBadToken
// when the API would no longer accept it (a revoked token), another error
// when it cannot be checked now.
type RecheckFunc func(ctx context.Context, src Source) (Identity, error)
