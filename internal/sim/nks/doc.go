// Package nks simulates the container cluster API of spec/cluster-api.md
// (Magnum-derived) for rehearsals and tests: every operation of the spec's
// endpoint table under /v1, with the behaviour FIDELITY.md reports of the
// real service.
//
// # State and time
//
// Clusters own node groups (default-master first, default-worker created
// with the cluster, more added by the node-group create); groups own nodes
// with UUIDs and addresses from the cluster's VPC subnet. Paths accept a
// name or a UUID, except the task-history paths, which take the cluster
// UUID as the spec says.
//
// Every mutating call records a task (the task history) IN_PROGRESS and
// moves the resource to *_IN_PROGRESS; when the simulated clock passes the
// operation's duration (DefaultDurations, changed with SetDuration or
// POST /_admin/durations) the task ends SUCCESS and the change applies
// (CREATE_COMPLETE, UPDATE_COMPLETE, or the resource is gone after a
// delete), or FAIL with its contents when a FailNext rule matched
// (*_FAILED, status_reason set, nothing changed). Transitions are computed
// lazily on every request from the clock: no goroutines, and
// sim.Clock.Advance makes them happen at once.
//
// # Errors
//
// Errors use the Magnum body {"errors":[{request_id, code, status, title,
// detail, links}]}: 401 without a valid X-Auth-Token (the static token of
// Connection, or one issued by the identity service of the same server),
// 406 for a bad version header, or a missing one on node-group calls (both
// OpenStack-API-Version and Platform-API-Version are read), 404 unknown
// cluster/group/event, 409 duplicate name, 400 for the spec's limits (the
// rules of internal/cloud/nks, shared with the client and the steps) and
// for an operation already in progress, 403 on GET of default-master.
//
// "In progress" covers the cluster's node groups: a cluster delete while a
// group is still *_IN_PROGRESS (DELETE_IN_PROGRESS included) is refused
// with 400, as FIDELITY's "an operation already in progress on the cluster
// or group 400" suggests without saying so for deletes. The spec fixes
// nothing here; a caller (gophercloud's users, nks.nodegroup.delete with
// wait) waits for the group's GET to answer 404 before deleting the
// cluster. Every route also accepts its path with a trailing slash
// (python-magnumclient writes /nodegroups/), see sim.ExactPaths.
//
// # References
//
// A create's fixed_network, fixed_subnet, external_network_id,
// external_subnet_id_list and node_image, and a node group's image_id, are
// checked against the world of sim/network (what its GET /v2.0/networks and
// /v2/images answer): unknown or mismatched UUIDs answer 400. Connection
// carries network_url and image_url when those services run.
//
// # Admin routes
//
// POST /_admin/fail-next, /_admin/durations, /_admin/versions and
// /_admin/subnets (see adminRoutes), each with a Go method for in-process
// tests. The service is safe for concurrent use: one mutex guards it.
package nks
