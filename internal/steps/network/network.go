package network

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/runbook/runbook/internal/cloud/network"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

type listParams struct {
	connParam
	ID             string `json:"id" desc:"only the network of this UUID"`
	Name           string `json:"name" desc:"only networks of this name"`
	Status         string `json:"status" enum:"ACTIVE,DOWN,BUILD,ERROR" desc:"only networks in this status"`
	RouterExternal *bool  `json:"router_external" desc:"only networks attached (true) or not attached (false) to the internet gateway (router:external)"`
	Shared         *bool  `json:"shared" desc:"only shared (true) or unshared (false) networks"`
	TenantID       string `json:"tenant_id" desc:"only networks of this project (tenant)"`
}

func (p *listParams) filter() network.NetworkFilter {
	return network.NetworkFilter{ID: p.ID, Name: p.Name, Status: p.Status, TenantID: p.TenantID,
		RouterExternal: p.RouterExternal, Shared: p.Shared}
}

type subnetsParams struct {
	connParam
	NetworkID string `json:"network_id" required:"true" desc:"UUID of the network whose subnets are listed"`
	Name      string `json:"name" desc:"only subnets of this name"`
	CIDR      string `json:"cidr" format:"cidr" desc:"only the subnet of this range"`
}

type externalParams struct {
	connParam
	Name string `json:"name" desc:"the internet-gateway network to take when several are router:external"`
}

func networkView(n *network.Network) map[string]any {
	return map[string]any{
		"id": n.ID, "name": n.Name, "status": n.Status, "subnets": strList(n.Subnets),
		"router_external": n.RouterExternal, "shared": n.Shared, "tenant_id": n.TenantID,
	}
}

func subnetView(s *network.Subnet) map[string]any {
	return map[string]any{"id": s.ID, "name": s.Name, "network_id": s.NetworkID, "cidr": s.CIDR, "gateway_ip": s.GatewayIP}
}

const networkNote = "on the network API: the connection's network_url, else the region's host"

var yes = true

func init() {
	steps.Register(steps.Define(steps.Def[listParams]{
		Type:    "network.list",
		Summary: "List VPC networks, filtered by name, UUID, status, router:external, shared or project.",
		Example: map[string]any{"router_external": true, "status": "ACTIVE"},
		Outputs: []steps.Output{
			{Name: "networks", Type: "list", Description: "networks as maps: id, name, status, subnets (UUIDs), router_external, shared, tenant_id"},
			{Name: "network_ids", Type: "list", Description: "their UUIDs, in the API's order"},
			{Name: "count", Type: "integer", Description: "number of networks listed"},
		},
		Plan: func(p *listParams) []steps.PlannedCall {
			return []steps.PlannedCall{{Method: http.MethodGet, Note: networkNote,
				Path: planPath(network.NetworksPath(p.filter()), p.ID, p.Name, p.Status, p.TenantID)}}
		},
		Run: func(ctx context.Context, c *steps.Call, p *listParams) (steps.Outputs, error) {
			return read(ctx, c, p.Connection, func(cl *network.Client) (steps.Outputs, error) {
				nets, err := cl.ListNetworks(ctx, p.filter())
				if err != nil {
					return nil, err
				}
				list, ids := []any{}, []any{}
				for i := range nets {
					list = append(list, networkView(&nets[i]))
					ids = append(ids, nets[i].ID)
				}
				return steps.Outputs{"networks": list, "network_ids": ids, "count": len(nets)}, nil
			})
		},
	}))

	steps.Register(steps.Define(steps.Def[subnetsParams]{
		Type:    "network.subnets",
		Summary: "List the subnets of a VPC network.",
		Example: map[string]any{"network_id": "a1b2c3d4-0000-4000-8000-0000000000a1", "cidr": "192.168.0.0/24"},
		Outputs: []steps.Output{
			{Name: "subnets", Type: "list", Description: "subnets as maps: id, name, network_id, cidr, gateway_ip"},
			{Name: "subnet_id_list", Type: "list", Description: "their UUIDs, in the API's order"},
			{Name: "subnet_ids", Type: "string", Description: "the same UUIDs joined with colons (the form of the *_subnet_id_list labels)"},
			{Name: "count", Type: "integer", Description: "number of subnets listed"},
		},
		Plan: func(p *subnetsParams) []steps.PlannedCall {
			f := network.SubnetFilter{NetworkID: p.NetworkID, Name: p.Name, CIDR: p.CIDR}
			return []steps.PlannedCall{{Method: http.MethodGet, Note: networkNote,
				Path: planPath(network.SubnetsPath(f), p.NetworkID, p.Name, p.CIDR)}}
		},
		Run: func(ctx context.Context, c *steps.Call, p *subnetsParams) (steps.Outputs, error) {
			return read(ctx, c, p.Connection, func(cl *network.Client) (steps.Outputs, error) {
				subs, err := cl.ListSubnets(ctx, network.SubnetFilter{NetworkID: p.NetworkID, Name: p.Name, CIDR: p.CIDR})
				if err != nil {
					return nil, err
				}
				list, ids := []any{}, []string{}
				for i := range subs {
					list = append(list, subnetView(&subs[i]))
					ids = append(ids, subs[i].ID)
				}
				return steps.Outputs{"subnets": list, "subnet_id_list": strList(ids), "subnet_ids": strings.Join(ids, ":"), "count": len(subs)}, nil
			})
		},
	}))

	steps.Register(steps.Define(steps.Def[externalParams]{
		Type: "network.external",
		Summary: "Find the internet-gateway network (router:external) and its subnets, " +
			"for a cluster create's external_network_id and external_subnet_id_list.",
		Example: map[string]any{"name": "Public Network"},
		Outputs: []steps.Output{
			{Name: "network_id", Type: "string", Description: "UUID of the internet-gateway network (label external_network_id)"},
			{Name: "network_name", Type: "string", Description: "its name"},
			{Name: "subnet_id_list", Type: "list", Description: "UUIDs of its subnets (param external_subnet_id_list of nks.cluster.create)"},
			{Name: "subnet_ids", Type: "string", Description: "the same UUIDs joined with colons (the label value external_subnet_id_list)"},
			{Name: "network", Type: "map", Description: "the network (see network.list)"},
		},
		Plan: func(p *externalParams) []steps.PlannedCall {
			call := steps.PlannedCall{Method: http.MethodGet, Note: networkNote,
				Path: network.NetworksPath(network.NetworkFilter{RouterExternal: &yes})}
			if p.Name != "" {
				call.Note += fmt.Sprintf("; the one named %s is taken", p.Name)
			}
			return []steps.PlannedCall{call}
		},
		Run: func(ctx context.Context, c *steps.Call, p *externalParams) (steps.Outputs, error) {
			return read(ctx, c, p.Connection, func(cl *network.Client) (steps.Outputs, error) {
				nets, err := cl.ListNetworks(ctx, network.NetworkFilter{RouterExternal: &yes})
				if err != nil {
					return nil, err
				}
				n, err := pickExternal(nets, p.Name)
				if err != nil {
					return nil, err
				}
				return steps.Outputs{"network_id": n.ID, "network_name": n.Name, "subnet_id_list": strList(n.Subnets),
					"subnet_ids": strings.Join(n.Subnets, ":"), "network": networkView(n)}, nil
			})
		},
	}))
}

// pickExternal chooses the internet-gateway network among the
// router:external networks: the only one, or the one named name.
func pickExternal(nets []network.Network, name string) (*network.Network, error) {
	var cands []string
	for _, n := range nets {
		cands = append(cands, fmt.Sprintf("%q (%s)", n.Name, n.ID))
	}
	var match []*network.Network
	for i := range nets {
		if name == "" || nets[i].Name == name || nets[i].ID == name {
			match = append(match, &nets[i])
		}
	}
	switch {
	case len(nets) == 0:
		return nil, fault.Errorf(fault.NotFound, "network.external: no network is router:external (attached to the internet gateway); attach one to the internet gateway, or leave external_network_id unset")
	case len(match) == 0:
		return nil, fault.Errorf(fault.NotFound, "network.external: no router:external network is named %q; they are %s", name, strings.Join(cands, ", "))
	case len(match) > 1 && name == "":
		return nil, fault.Errorf(fault.Invalid, "network.external: %d networks are router:external: %s; set name to choose one", len(match), strings.Join(cands, ", "))
	case len(match) > 1:
		return nil, fault.Errorf(fault.Invalid, "network.external: %d router:external networks are named %q: %s; set name to a UUID", len(match), name, strings.Join(cands, ", "))
	}
	n := match[0]
	if len(n.Subnets) == 0 {
		return nil, fault.Errorf(fault.NotFound, "network.external: the internet-gateway network %q (%s) has no subnets; a cluster create needs their UUIDs", n.Name, n.ID)
	}
	return n, nil
}
