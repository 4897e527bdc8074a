// Package network is the HTTP client of the two lookups a cluster create
// needs besides the cluster API (spec/cluster-api.md, "Lookup values used
// in requests"): the Neutron-style network API, which finds the
// internet-gateway network with GET /v2.0/networks?router:external=True and
// its subnets, and the Glance-style image API, which lists the base images
// whose UUIDs are "fixed per region".
//
// # Main types
//
// Client is built from a Config (New) or from a runbook connection map
// (ConfigFrom: network_url, image_url, region — the cluster connection
// carries them). Methods: ListNetworks (NetworkFilter), GetNetwork,
// ListSubnets (SubnetFilter), ListImages (ImageFilter). Every call is a GET.
// NetworksPath, SubnetsPath and ImagesPath give the path and query a call
// sends, for plans.
//
// # Requests
//
// Every request carries Accept: application/json and X-Auth-Token from the
// TokenSource (*identity.Source, as for the cluster API). The base URLs
// default per region to the public hosts
// https://{region}-api-network-infrastructure.nhncloudservice.com and
// https://{region}-api-image-infrastructure.nhncloudservice.com (kr1, kr2,
// kr3, jp1; docs/simulator.md gives the sources); /v2.0/... and /v2/...
// are appended. Boolean filters are sent as the spec writes them
// (router:external=True). An image listing follows Glance's `next` links.
//
// # Errors
//
// Every error this package makes is an *Error whose Class classifies it:
// 429 throttled, 5xx unavailable, 404 not_found, 401 and 403
// unauthorized, other 4xx and bad settings invalid, an unreadable answer
// internal. Class values are spelled as the step error codes (fault.Code)
// they stand for, so the steps convert with one conversion. A connection
// failure is the call loop's *fault.Error coded unavailable, and errors of
// the TokenSource are wrapped unchanged; ClassOf reads the class of all
// three. Neutron's body {"NeutronError":{"type","message","detail"}} fills
// Type and Message; Glance's plain-text 404 becomes the Message.
//
// # Retries
//
// The loop is internal/cloud/httpcall's; the policy is stated in New.
// Calls are retried on 429, 5xx and network errors: Config.MaxAttempts in
// all (default 4), backoff with jitter, Retry-After honoured, the wait cut
// short by ctx. A 401 is retried once with a fresh token
// (TokenSource.Invalidate, then Token); a static token that comes back
// unchanged is not resent.
package network
