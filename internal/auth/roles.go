package auth

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
)

// Permission is one thing an identity may do.
type Permission string

// The permissions. Those marked global are not about one playbook: only an
// unscoped grant gives them.
const (
	ReadPlaybooks Permission = "playbooks.read"
	ReadRuns      Permission = "runs.read"
	StartRuns     Permission = "runs.start"
	CancelRuns    Permission = "runs.cancel"
	RetryRuns     Permission = "runs.retry"
	ResumeRuns    Permission = "runs.resume"
	ApproveRuns   Permission = "runs.approve"
	// PauseSchedules pauses and resumes a playbook's schedule triggers.
	PauseSchedules Permission = "schedules.pause"
	// PauseRuns pauses and resumes the runs of the playbooks a pause
	// selects (runbook pause). Global: a pause selects by a pattern or a
	// label, which may cover playbooks beyond a grant's scope.
	PauseRuns    Permission = "runs.pause"
	Reload       Permission = "server.reload" // global
	ManageTokens Permission = "tokens.manage" // global
	ReadAudit    Permission = "audit.read"    // global
	Admin        Permission = "server.admin"  // global: anything without a narrower permission
	// WorkAsAgent registers a runbook agent and takes, runs and answers
	// the step attempts assigned to it (docs/agents.md). A grant limited
	// by label:KEY=VALUE patterns limits the labels the agent may claim
	// (MayClaim), not playbooks.
	WorkAsAgent Permission = "agents.work"
)

// global reports whether p is not about one playbook.
func global(p Permission) bool {
	return p == Reload || p == ManageTokens || p == ReadAudit || p == Admin || p == PauseRuns
}

// MayClaim returns nil when the identity may register an agent with
// labels: a grant of agents.work without patterns allows any labels; one
// with label:KEY=VALUE patterns allows the labels each of which some
// pattern matches (KEY equal, VALUE a path.Match pattern). Otherwise the
// error names the first label no grant allows.
func (id *Identity) MayClaim(labels map[string]string) error {
	if id == nil {
		return fmt.Errorf("no identity")
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var scoped []Grant
	for _, g := range id.Grants {
		if !slices.Contains(RolePermissions[g.Role], WorkAsAgent) {
			continue
		}
		if len(g.Playbooks) == 0 {
			return nil
		}
		scoped = append(scoped, g)
	}
	for _, k := range keys {
		if !slices.ContainsFunc(scoped, func(g Grant) bool { return g.covers(Playbook{Name: "-", Labels: map[string]string{k: labels[k]}}) }) {
			return fmt.Errorf("%s may not claim the label %s=%s (its token allows %s)", id.Name, k, labels[k], claimable(scoped))
		}
	}
	return nil
}

func claimable(gs []Grant) string {
	var out []string
	for _, g := range gs {
		for _, p := range g.Playbooks {
			if sel, ok := strings.CutPrefix(p, labelPrefix); ok {
				out = append(out, sel)
			}
		}
	}
	if len(out) == 0 {
		return "no label"
	}
	return strings.Join(out, ", ")
}

// The roles.
const (
	RoleViewer   = "viewer"
	RoleOperator = "operator"
	RoleApprover = "approver"
	RoleAdmin    = "admin"
	// RoleAgent is a runbook agent's: it may work as an agent, nothing
	// else (not even read runs).
	RoleAgent = "agent"
)

// RolePermissions is what each role may do.
var RolePermissions = map[string][]Permission{
	RoleViewer:   {ReadPlaybooks, ReadRuns},
	RoleOperator: {ReadPlaybooks, ReadRuns, StartRuns, CancelRuns, RetryRuns, ResumeRuns, PauseSchedules, PauseRuns},
	RoleApprover: {ReadPlaybooks, ReadRuns, ApproveRuns},
	RoleAdmin:    {ReadPlaybooks, ReadRuns, StartRuns, CancelRuns, RetryRuns, ResumeRuns, PauseSchedules, PauseRuns, ApproveRuns, Reload, ManageTokens, ReadAudit, Admin},
	RoleAgent:    {WorkAsAgent},
}

// RoleNames lists the roles, sorted.
func RoleNames() []string {
	out := make([]string, 0, len(RolePermissions))
	for r := range RolePermissions {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// CheckRoles returns an error naming the first unknown role, or nil.
func CheckRoles(roles []string) error {
	if len(roles) == 0 {
		return fmt.Errorf("at least one role is needed (%s)", strings.Join(RoleNames(), ", "))
	}
	for _, r := range roles {
		if _, ok := RolePermissions[r]; !ok {
			return fmt.Errorf("unknown role %q (want %s)", r, strings.Join(RoleNames(), ", "))
		}
	}
	return nil
}

// CheckPatterns returns an error naming the first malformed playbook
// pattern, or nil.
func CheckPatterns(patterns []string) error {
	for _, p := range patterns {
		if p == "" {
			return fmt.Errorf("empty playbook pattern")
		}
		if sel, ok := strings.CutPrefix(p, labelPrefix); ok {
			key, val, found := strings.Cut(sel, "=")
			if !found || key == "" || val == "" {
				return fmt.Errorf("playbook pattern %q: a label is label:KEY=VALUE (the value may be a pattern)", p)
			}
			p = val
		}
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("playbook pattern %q: %w", p, err)
		}
	}
	return nil
}

// labelPrefix starts a pattern that selects playbooks by a label:
// label:team=ml, label:tier=prod*.
const labelPrefix = "label:"

// Playbook is what a scope is checked against: a playbook's name and its
// labels.
type Playbook struct {
	Name   string
	Labels map[string]string
}

// Grant is a role, limited to the playbooks matching one of Playbooks
// when that is not empty.
type Grant struct {
	Role      string   `json:"role"`
	Playbooks []string `json:"playbooks,omitempty"`
}

// covers reports whether the grant applies to pb (a global action when
// its name is ""): a pattern matches its name, label:KEY=VALUE one of
// its labels.
func (g Grant) covers(pb Playbook) bool {
	if len(g.Playbooks) == 0 {
		return true
	}
	if pb.Name == "" {
		return false
	}
	for _, p := range g.Playbooks {
		if sel, ok := strings.CutPrefix(p, labelPrefix); ok {
			key, val, _ := strings.Cut(sel, "=")
			if v, has := pb.Labels[key]; has {
				if ok, _ := path.Match(val, v); ok {
					return true
				}
			}
			continue
		}
		if ok, _ := path.Match(p, pb.Name); ok {
			return true
		}
	}
	return false
}

// Identity kinds.
const (
	KindUser   = "user"   // auth.users of the config
	KindToken  = "token"  // created with runbook token create
	KindOIDC   = "oidc"   // a JWT of the configured issuer
	KindServer = "server" // the token named by server.token_secret
)

// Identity is who presented a token. It never holds the token.
type Identity struct {
	Name   string  `json:"name"`
	Kind   string  `json:"kind"`
	Grants []Grant `json:"grants"`
}

// Grants gives each role the same playbook patterns.
func Grants(roles, playbooks []string) []Grant {
	out := make([]Grant, 0, len(roles))
	for _, r := range roles {
		out = append(out, Grant{Role: r, Playbooks: slices.Clone(playbooks)})
	}
	return out
}

// Roles lists the identity's roles, sorted, without duplicates.
func (id *Identity) Roles() []string {
	var out []string
	for _, g := range id.Grants {
		if !slices.Contains(out, g.Role) {
			out = append(out, g.Role)
		}
	}
	sort.Strings(out)
	return out
}

// Can reports whether the identity may do p on the playbook named
// playbook, by its name alone; playbook "" asks for p on every playbook
// (and is how global permissions are asked). CanOn also sees labels.
func (id *Identity) Can(p Permission, playbook string) bool {
	return id.CanOn(p, Playbook{Name: playbook})
}

// CanOn reports whether the identity may do p on pb, whose labels a
// label:KEY=VALUE scope reads.
func (id *Identity) CanOn(p Permission, pb Playbook) bool {
	if id == nil {
		return false
	}
	for _, g := range id.Grants {
		if global(p) && len(g.Playbooks) > 0 {
			continue
		}
		if slices.Contains(RolePermissions[g.Role], p) && g.covers(pb) {
			return true
		}
	}
	return false
}

// CanSome reports whether the identity may do p on at least one playbook
// (for global permissions: at all). A listing checks this, then Can for
// each item it shows.
func (id *Identity) CanSome(p Permission) bool {
	if id == nil {
		return false
	}
	for _, g := range id.Grants {
		if global(p) && len(g.Playbooks) > 0 {
			continue
		}
		if slices.Contains(RolePermissions[g.Role], p) {
			return true
		}
	}
	return false
}

// Permissions lists every permission the identity has on at least one
// playbook, sorted: what a UI needs to show or hide its actions.
func (id *Identity) Permissions() []Permission {
	var out []Permission
	for _, ps := range RolePermissions {
		for _, p := range ps {
			if !slices.Contains(out, p) && id.CanSome(p) {
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out
}

// Matches reports whether an approvers entry names this identity: "NAME"
// matches the identity's name or one of its roles, "user:NAME" only the
// name and "role:NAME" only a role.
func (id *Identity) Matches(entry string) bool {
	return MatchesApprover(entry, id.Name, id.Roles())
}

// MatchesApprover reports whether an approvers entry names the answerer
// with name and roles (see Identity.Matches).
func MatchesApprover(entry, name string, roles []string) bool {
	switch {
	case strings.HasPrefix(entry, "user:"):
		return name == strings.TrimPrefix(entry, "user:")
	case strings.HasPrefix(entry, "role:"):
		return slices.Contains(roles, strings.TrimPrefix(entry, "role:"))
	}
	return entry == name || slices.Contains(roles, entry)
}
