package engine

import "github.com/runbook/runbook/internal/inventory"

// runHosts gives hosts() the config's inventory through the connection
// resolver (Options.Connection), which holds it as the connection
// inventory.Connection: no option of its own.
type runHosts runState

// Hosts is the inventory's listing; without a resolver, none.
func (h *runHosts) Hosts() (map[string]any, error) {
	rs := (*runState)(h)
	if rs.e.o.Connection == nil {
		return nil, nil
	}
	return rs.e.o.Connection(inventory.Connection, nil)
}
