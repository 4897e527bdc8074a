// Package nks is the HTTP client of the container cluster API
// (spec/cluster-api.md, Magnum-derived), and in rules.go the spec's
// request rules as pure functions shared by the steps and the simulator.
//
// # Main types
//
// Client is built from a Config (New) or from a runbook connection map
// (ConfigFrom: base_url, region). It has one method per operation of the
// spec's endpoint table (23): ListClusters, GetCluster, CreateCluster,
// DeleteCluster, ResizeCluster, Kubeconfig, UpdateCNI, GetIPACL, SetIPACL,
// ListNodeGroups, GetNodeGroup, CreateNodeGroup, DeleteNodeGroup,
// StopNodes, StartNodes, GetAutoscaler, SetAutoscaler, UpgradeNodeGroup,
// SetUserScript, ChangeFlavor, ListTasks, GetTask, Supports; plus
// LatestEvent, which finds the task a mutating call started (the calls
// answer the cluster or node group UUID, not the task). Nothing here
// waits for tasks; the steps do.
//
// # Requests
//
// Every request carries Accept and Content-Type application/json,
// X-Auth-Token from the TokenSource, and the version under both header
// names, Platform-API-Version (the spec) and OpenStack-API-Version (the
// public clients): without one the real service answers 406. The base URL
// is https://{region}-api-kubernetes-infrastructure.nhncloudservice.com
// for kr1, kr2 and kr3 unless Config.BaseURL overrides it. Path segments
// (cluster and node group names) are escaped.
//
// # Errors
//
// Every error is a *fault.Error whose Code classifies it; when the API
// answered, the chain also holds an *APIError read from the Magnum body
// {"errors":[{"status","code","title","detail",...}]}: errors.As finds
// both. 429 throttled, 5xx unavailable, 404 not_found, 409 conflict,
// 401/403 unauthorized, 400 in_progress when the detail says an operation
// is in progress (the service gives that 400 too) and invalid otherwise,
// 406 and other 4xx invalid.
//
// # Retries
//
// The loop is internal/cloud/httpcall's; the policy is stated in New.
// GETs are retried on 429, 5xx and network errors: Config.MaxAttempts in
// all (default 4), exponential backoff with jitter, Retry-After honoured,
// the wait cut short by ctx; Config.Sleep replaces it in tests. Mutating
// calls (POST, PATCH, DELETE) are never repeated after a 5xx or a network
// error once the request left: the service may have acted, so the error
// carries Data "ambiguous": true and the engine's intent/reconcile path
// decides. They are repeated on 429, which the service answers without
// acting, and after a connection that was never made. Any call answered
// 401 is repeated once with a fresh token (TokenSource.Invalidate, then
// Token); a static token that comes back unchanged is not resent.
//
// # Quirks tolerated
//
// Labels, autoscaler settings and the IP ACL's enable are documented as
// strings but samples show booleans and numbers: Labels and Text read
// all three (true as "True"). A task's contents may be null, and its
// resource name may come as resource.name. Times are read with or without
// an offset or fractional seconds (ParseTime).
package nks
