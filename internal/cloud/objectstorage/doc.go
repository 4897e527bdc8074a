// Package objectstorage is the client of the object storage behind obs://
// URIs (obs://{host}/v1/AUTH_{tenant}/{container}/{object}): OpenStack
// Swift, authenticated with an identity token sent as X-Auth-Token
// (spec/FIDELITY.md, "ML service").
//
// Parse and ParseURI read the URIs (at most 255 characters, the spec's path
// limit; no . or .. segments). An object part that is empty or ends in "/"
// names a prefix.
package objectstorage
