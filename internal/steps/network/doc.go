// Package network holds the lookup steps a cluster create needs besides
// the cluster API (spec/cluster-api.md, "Lookup values used in requests"):
// the internet-gateway network and its subnets, found with
// GET /v2.0/networks?router:external=True on the Neutron-style network API,
// and the base image UUIDs, "fixed per region", on the Glance-style image
// API. They reach both through internal/cloud/network.
//
// # Step types
//
//   - network.list: networks, filtered as the API allows (id, name, status,
//     router_external, shared, tenant_id).
//   - network.subnets: the subnets of a network (subnet_id_list, and
//     subnet_ids joined with colons).
//   - network.external: the one router:external network (or the one of
//     that `name`), its network_id, subnet_id_list (for the subnet list
//     params of nks.cluster.create) and subnet_ids (the colon-joined label
//     value external_subnet_id_list). None, several without a name, or one
//     without subnets fail with a message naming the candidates.
//   - image.find: the UUID of a base image by name in the connection's
//     region; an unknown name fails listing the names the region offers.
//
// # Connections
//
// The network and image APIs use the cluster API's credentials, so the
// steps read the cluster connection (param `connection`, default "nks"):
// its identity settings or token, region, and network_url / image_url,
// which default to the region's public hosts. None of the steps mutates.
//
// # Errors
//
// Errors of the client carry a network.Class, converted here to the step
// error code of the same name (stepErr); HTTP details go to the error's
// Data (http_status, type, message).
package network
