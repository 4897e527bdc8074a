package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/runbook/runbook/internal/config"
	"github.com/runbook/runbook/internal/inventory"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/steps"
	"github.com/runbook/runbook/internal/suggest"
)

// sshParamsNamingHosts are the params of an ssh step that name a host of
// the config's inventory.
var sshParamsNamingHosts = []string{"host", "jump"}

// hostDiagnostics checks that every ssh step's literal host and jump name
// a host of the config's hosts: a diagnostic at the param for each that
// does not.
func hostDiagnostics(pb *playbook.Playbook, cfg *config.Config) playbook.Diagnostics {
	var ds playbook.Diagnostics
	names := inventory.Names(cfg.Hosts)
	for _, st := range allSteps(pb) {
		if st.Uses != "ssh" {
			continue
		}
		for _, param := range sshParamsNamingHosts {
			name, ok := literalString(st, param)
			if !ok {
				continue
			}
			if _, found := cfg.Hosts[name]; found {
				continue
			}
			msg := fmt.Sprintf("host %q is not in hosts: of %s", name, cfg.File)
			if len(names) > 0 {
				msg += " (hosts: " + strings.Join(names, ", ") + ")" + suggest.Hint(name, names)
			}
			ds = append(ds, playbook.Diagnostic{Pos: st.ParamPos(param), Path: st.DiagPath + ".with." + param, Message: msg})
		}
	}
	return ds
}

// planHosts shows, under each ssh step whose host is known, where it
// would log in (user@address and the jump hosts before it), and a
// problem for a host the inventory lacks.
func planHosts(p *plan, pb *playbook.Playbook, cfg *config.Config) {
	byID := map[string]*playbook.Step{}
	for _, st := range allSteps(pb) {
		byID[st.ID] = st
	}
	for li := range p.Lists {
		for si := range p.Lists[li].Steps {
			ps := &p.Lists[li].Steps[si]
			st := byID[ps.ID]
			if st == nil || st.Uses != "ssh" {
				continue
			}
			name, ok := literalString(st, "host")
			if !ok {
				continue
			}
			h, found := cfg.Hosts[name]
			if !found {
				ps.Problems = append(ps.Problems, fmt.Sprintf("with.host: host %q is not in hosts: of %s", name, cfg.File))
				p.invalid = true
				continue
			}
			ps.Calls = append(ps.Calls, steps.PlannedCall{Method: "SSH", Path: h.User + "@" + h.Address, Note: jumpNote(cfg, h)})
		}
	}
}

// jumpNote names the jump hosts before h, "" without any.
func jumpNote(cfg *config.Config, h inventory.Host) string {
	var via []string
	for j := h.Jump; j != "" && len(via) < 8; j = cfg.Hosts[j].Jump {
		jh := cfg.Hosts[j]
		via = append(via, j+" ("+jh.User+"@"+jh.Address+")")
	}
	if len(via) == 0 {
		return ""
	}
	return "through " + strings.Join(via, ", then ")
}

func allSteps(pb *playbook.Playbook) []*playbook.Step {
	out := make([]*playbook.Step, 0, len(pb.Steps)+len(pb.OnFailure)+len(pb.Finally))
	out = append(out, pb.Steps...)
	out = append(out, pb.OnFailure...)
	return append(out, pb.Finally...)
}

// literalString is a step's `with` param when it is a literal string.
func literalString(st *playbook.Step, param string) (string, bool) {
	v, ok := st.With[param]
	if !ok || !v.Literal() {
		return "", false
	}
	x, _ := v.Eval(nil)
	s, ok := x.(string)
	return s, ok && s != ""
}

// configHosts gives hosts() the config's inventory in a plan.
type configHosts map[string]inventory.Host

func (c configHosts) Hosts() (map[string]any, error) { return inventory.Listing(c), nil }

// sameFile reports whether paths a and b name one existing file (a
// playbook called runbook.yaml is not the config).
func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}
