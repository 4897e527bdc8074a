package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"sync"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/steps"
)

// Agents runs the attempts of the steps placed on runbook agents
// (runs_on): the run host's dispatcher (internal/agent). Execute assigns
// the attempt to a live agent whose labels match, relays what the step
// prints to call.Output and its host calls (checkpoints, connections) to
// call.Host, and returns the attempt's result as a local step's Run
// would. It honours ctx: the step's timeout and the run's cancel end the
// attempt on the agent too. It is the one interface of its host the
// engine calls (Options.Host.Agents): where a new kind of host of step
// attempts plugs in (docs/architecture.md).
type Agents interface {
	Execute(ctx context.Context, a *AgentAttempt) (steps.Outputs, error)
}

// AgentAttempt is one attempt of a step placed on an agent.
type AgentAttempt struct {
	Call   *steps.Call
	Desc   *steps.Descriptor
	RunsOn *playbook.RunsOn
	// Playbook is the name of the run's playbook: an agent's limits per
	// playbook select by it.
	Playbook string
	// Reconcile is the unresolved intent of an earlier attempt of a
	// mutating step: the agent reconciles it (Descriptor.Reconcile)
	// before it calls anything, as a resumed local attempt does.
	Reconcile *steps.Intent
	// Record, when set, writes the step's log so far to the run's record
	// now, as a checkpoint does (a step's log otherwise waits for its next
	// write): Agents calls it, on the attempt's goroutine, once the log
	// says where the attempt runs or what it waits for, so that the run's
	// page and events say it while the attempt runs.
	Record func(context.Context)
}

// onAgent runs the attempt on an agent through Options.Host.Agents.
func (sr *stepRun) onAgent(ctx context.Context, call *steps.Call) (steps.Outputs, error) {
	agents := sr.rs.e.o.Host.Agents
	if agents == nil {
		return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf(
			"step %s runs on an agent (runs_on: %s) and this process dispatches to none: run the playbook on runbook serve, where agents connect", sr.rec.ID, sr.st.RunsOn)}
	}
	a := &AgentAttempt{Call: call, Desc: sr.st.Desc, RunsOn: sr.st.RunsOn, Playbook: sr.rs.pb.Name, Reconcile: sr.agentIntent,
		Record: func(ctx context.Context) { sr.save(ctx) }}
	sr.agentIntent = nil
	return agents.Execute(ctx, a)
}

// agentSecretNonce makes this process's agent-secret placeholders
// unguessable: a value from an input cannot pose as one and have an
// agent put its secret where the input's author reads it.
var agentSecretNonce = sync.OnceValue(func() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
})

// agentSecretRE matches this process's placeholders; its group is the
// agent's variable.
var agentSecretRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`rb-agent-secret-` + agentSecretNonce() + `-([A-Za-z_][A-Za-z0-9_]*)-end`)
})

// agentSecretPlaceholder stands for the agent's variable env in what the
// server evaluates (`secrets: {NAME: {agent: VAR}}`): the agent that runs
// the step puts the value there (AgentSecretRefs), so it never crosses
// the network.
func agentSecretPlaceholder(env string) string {
	return "rb-agent-secret-" + agentSecretNonce() + "-" + env + "-end"
}

// AgentSecretRefs returns the agent-secret placeholders in b, each with
// the agent's variable it stands for.
func AgentSecretRefs(b []byte) map[string]string {
	var out map[string]string
	for _, m := range agentSecretRE().FindAllSubmatch(b, -1) {
		if out == nil {
			out = map[string]string{}
		}
		out[string(m[0])] = string(m[1])
	}
	return out
}

// agentSecretsHere refuses a step that runs in this process but reads a
// secret only an agent holds.
func (sr *stepRun) agentSecretsHere(call *steps.Call) error {
	if len(sr.rs.pb.AgentSecrets) == 0 {
		return nil
	}
	b, _ := json.Marshal([]any{call.Params, call.Extra})
	for _, env := range AgentSecretRefs(b) {
		return &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf(
			"step %s reads the agent secret %s, which only an agent holds: give the step runs_on", sr.rec.ID, env)}
	}
	return nil
}
