// Package network simulates the two lookups a cluster create needs besides
// the cluster API itself (spec/cluster-api.md, "Lookup values used in
// requests"), in the shape of the public NHN Cloud APIs they belong to:
//
//   - "network", a Neutron-style VPC API: GET /v2.0/networks (filters id,
//     name, router:external, shared, tenant_id, status; several values of
//     one filter match any) and /v2.0/networks/{id}, GET /v2.0/subnets
//     (filters id, name, network_id, cidr) and /v2.0/subnets/{id};
//   - "image", a Glance-style image API: GET /v2/images (filters name, id,
//     visibility, status) and /v2/images/{id}.
//
// Both read one World per simulator server (For(env)), which the cluster
// simulator checks fixed_network, fixed_subnet, external_network_id,
// external_subnet_id_list, node_image and a node group's image_id against:
// an unknown UUID is refused there, so a rehearsal catches a wrong lookup.
//
// # The default world
//
// One region (kr1), the tenant of the identity simulator:
//
//	Default Network   a1b2c3d4-0000-4000-8000-000000000001  internal VPC
//	  Default Network Subnet  …-000000000002  192.168.0.0/24
//	Public Network    a1b2c3d4-0000-4000-8000-0000000000a1  router:external
//	  Public Subnet 1         …-0000000000a2  133.186.0.0/24
//	  Public Subnet 2         …-0000000000a3  133.186.1.0/24
//
// and the five base images the spec lists (CentOS 7.9, Debian 11.8
// Bullseye, Rocky Linux 8.9, Ubuntu Server 20.04.6 LTS, Ubuntu Server
// 22.04.3 LTS), public and active; the last is
// 6f6b9a7e-2a3c-4d8b-9c41-0e5b1f0f6a11, the others derive from the region
// and the name (ImageID), so each region has its own UUIDs as the spec
// says.
//
// Every call needs X-Auth-Token: an identity token, the static token of
// Connection or the cluster simulator's static token (401 otherwise). The
// last one is accepted because the network.* steps use the cluster
// connection, and on the real service one identity token serves every API
// of the tenant. Errors use Neutron's body
// {"NeutronError":{"type","message","detail"}}; Glance answers 404 in
// plain text. World.AddNetwork and AddSubnet (or POST /_admin/networks and
// /_admin/subnets on the network service) extend the world.
package network
