// Package nks holds the cluster step types: one per operation of the
// container cluster API (spec/cluster-api.md), named nks.<resource>.<action>,
// each reaching the API through internal/cloud/nks with the settings of a
// named connection (param `connection`, default "nks").
//
// # Step types
//
// Clusters: nks.cluster.list, .get, .create, .delete, .resize, .kubeconfig,
// .cni_update, .ipacl.get, .ipacl.set. Node groups: nks.nodegroup.list,
// .get, .create, .delete, .stop_nodes, .start_nodes, .autoscaler.get,
// .autoscaler.set, .upgrade (one group), .userscript, .flavor. Task history
// and versions: nks.task.list, nks.task.get, nks.supports. Composite steps
// (nks.task.wait, nks.cluster.upgrade) and create reconciliation live in
// task.go, upgrade.go and reconcile.go.
//
// Params mirror the spec's request fields in snake_case; the True/False
// strings of the API are booleans, counts and sizes are integers, and
// colon-separated lists are lists. A cluster or node group is given by
// name or UUID. Reads output the resource as a map plus its main fields
// (uuid, name, status, node_count, kube_tag); mutations output the UUIDs
// the call answered.
//
// # Checks
//
// The spec's limits are defined once, in internal/cloud/nks/rules.go,
// which the simulator enforces too. A limit of one field (resize
// node_count 1..10, pod subnet 20..28, the rolling-update minimums, the
// CNI, flavor change and IP access control values, name lengths, the
// version form) is a params tag, so the playbook schema shows it to
// editors; limits_test.go compares every such tag with its rules.go
// constant. Rules between fields (a pod subnet that fits its network,
// CIDR bands that do not overlap, the autoscaler's minimum not above its
// maximum) are Check funcs that call rules.go. Both apply to literal
// values, so `runbook validate` reports node_count 11 or pod subnet 29
// with the file position; Decode applies both before Run, so a value
// computed by an expression fails the step before any API call. Rules
// that need the service (a version /v1/supports marks true, a worker not
// above the master, a pod network clear of the cluster's service network)
// are checked in Run, before the mutating request.
//
// # Mutations
//
// Mutating steps go through mutate (mutate.go): one client per run, one
// checkpoint written before and after the request, so a resumed run never
// sends it twice after its answer was recorded, and the creates' Reconcile
// reads the same checkpoint to tell a request in doubt. create, delete,
// resize, cni_update and the node group mutations take `wait` (default
// false) and `wait_timeout` (default 2h, at most 72h): the step then ends
// when the task the call started reaches SUCCESS, and outputs task_uuid
// and task_status (both "" without wait). Pre-reads a mutation needs (the
// cluster's UUID, the supported versions) run before the answer is
// recorded, so a resume skips them too.
//
// # Files
//
// nks.cluster.kubeconfig with `file` writes through os.Root below the
// playbook directory, mode 0600, and refuses to replace a file unless
// `overwrite: true`; the kubeconfig text (credentials) is then not output.
package nks
