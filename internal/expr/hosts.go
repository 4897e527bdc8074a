package expr

import (
	"errors"

	"github.com/runbook/runbook/internal/inventory"
)

// HostSource gives hosts() the config's hosts: inventory: its listing
// (inventory.Listing: each host's name, address, user and labels by
// name, never a credential).
type HostSource interface {
	Hosts() (map[string]any, error)
}

// fnHosts is hosts([selector]): the hosts of the inventory whose labels
// match the selector ("role=web,env=prod"; "*" or none: every host), by
// name, each {name, address, user, labels}. An empty inventory is an
// error (a for_each over it would silently do nothing); a selector that
// matches no host gives [].
func fnHosts(rt *evalState, args []any) (any, error) {
	sel := ""
	if len(args) == 1 {
		s, err := argString("selector", args[0])
		if err != nil {
			return nil, err
		}
		sel = s
	}
	if _, err := inventory.ParseSelector(sel); err != nil {
		return nil, err
	}
	if rt.scope == nil || rt.scope.Hosts == nil {
		return nil, errors.New("no hosts: inventory is known here")
	}
	listing, err := rt.scope.Hosts.Hosts()
	if err != nil {
		return nil, err
	}
	if len(listing) == 0 {
		return nil, errors.New("the inventory is empty: add hosts under hosts: in runbook.yaml (the config; --config FILE)")
	}
	out, err := inventory.Select(listing, sel)
	if err != nil {
		return nil, err
	}
	return out, rt.grow(shallowSize(out))
}
