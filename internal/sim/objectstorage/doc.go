// Package objectstorage simulates the object storage behind obs:// URIs:
// OpenStack Swift, reached with an identity token (spec/FIDELITY.md).
//
// Store holds the objects of one simulator server; For(env) returns it, so
// the HTTP service and in-process simulators (the ML service reading
// datasets, writing models) see the same objects. Accounts are
// "AUTH_<tenant>"; the Go API accepts a tenant ID with or without that
// prefix.
//
// The HTTP API, below the service prefix:
//
//	PUT    /v1/AUTH_{tenant}/{container}             create a container (201, 202 when it exists)
//	GET    /v1/AUTH_{tenant}/{container}             list (?prefix=&delimiter=&marker=&end_marker=&limit=&format=json)
//	HEAD   /v1/AUTH_{tenant}/{container}             container metadata
//	DELETE /v1/AUTH_{tenant}/{container}             delete an empty container (409 otherwise)
//	PUT    /v1/AUTH_{tenant}/{container}/{object}    store (201, ETag = MD5; 422 on an ETag mismatch)
//	GET    /v1/AUTH_{tenant}/{container}/{object}    read (ETag, Content-Length, Last-Modified)
//	HEAD   /v1/AUTH_{tenant}/{container}/{object}    metadata
//	DELETE /v1/AUTH_{tenant}/{container}/{object}    remove (204)
//
// Every call needs X-Auth-Token (or X-Storage-Token) holding a valid token
// of the identity simulator, or the service's static token (401
// otherwise). Unlike Swift, any AUTH_ account is served with a valid token,
// so obs:// URIs written for a real tenant run against the simulator
// unchanged. Listing pages at 10000 names as Swift does (412 for a larger
// limit). Objects are kept in memory; the simulator framework journals at
// most 32 MiB of a request body, so larger objects are refused (408, the
// body came short).
package objectstorage
