// Package inventory is the hosts: inventory of the config as the rest of
// runbook sees it: a Host (name, address, user, labels, how its key is
// verified, the names of the secrets that log in to it, a jump host), the
// connection names through which a run reaches the inventory, and label
// selectors ("role=web,env=prod").
//
// The config (internal/config) decodes hosts: into Hosts; the CLI resolves
// their secrets into connection settings (Settings) and hands them to the
// engine's connection resolver under two kinds of name:
//
//   - Connection ("hosts"): every host's public fields (name, address,
//     user, labels; never a credential), which the hosts() expression
//     function filters with a selector (Select);
//   - ConnectionName(NAME) ("host:NAME"): one host with its credentials,
//     which the ssh step reads (FromSettings).
//
// A playbook cannot override either: the resolver refuses a playbook's
// connections: entry of those names, so a playbook never sends the
// inventory's password to another address.
package inventory
