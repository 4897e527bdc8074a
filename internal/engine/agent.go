package engine

import (
	"context"
	"fmt"

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
// attempt on the agent too.
type Agents interface {
	Execute(ctx context.Context, a *AgentAttempt) (steps.Outputs, error)
}

// AgentAttempt is one attempt of a step placed on an agent.
type AgentAttempt struct {
	Call   *steps.Call
	Desc   *steps.Descriptor
	RunsOn *playbook.RunsOn
	// Reconcile is the unresolved intent of an earlier attempt of a
	// mutating step: the agent reconciles it (Descriptor.Reconcile)
	// before it calls anything, as a resumed local attempt does.
	Reconcile *steps.Intent
}

// onAgent runs the attempt on an agent through Options.Agents.
func (sr *stepRun) onAgent(ctx context.Context, call *steps.Call) (steps.Outputs, error) {
	agents := sr.rs.e.o.Host.Agents
	if agents == nil {
		return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf(
			"step %s runs on an agent (runs_on: %s) and this process dispatches to none: run the playbook on runbook serve, where agents connect", sr.rec.ID, sr.st.RunsOn)}
	}
	a := &AgentAttempt{Call: call, Desc: sr.st.Desc, RunsOn: sr.st.RunsOn, Reconcile: sr.agentIntent}
	sr.agentIntent = nil
	return agents.Execute(ctx, a)
}
