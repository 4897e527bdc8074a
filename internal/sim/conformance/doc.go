// Package conformance drives the simulators with public clients that
// nobody in this project wrote, unchanged, the way users rehearse against
// `runbook sim`:
//
//   - gophercloud's containerinfra client (a Go test dependency): clusters
//     and node groups end to end, authenticated through the identity
//     simulator and finding the cluster API in its service catalog;
//   - python-magnumclient (Debian python3-magnumclient), run by python3
//     with the scripts under testdata/: with a token and an explicit
//     endpoint, with a keystoneauth token session, and with catalog
//     discovery through the identity simulator's /v2.0/tokens;
//   - a help-center notice-list request signed from the spec's description
//     alone, not with the project's client.
//
// The package holds only tests. The python tests skip when python3 cannot
// import magnumclient, except under CI=true, where they fail: .ci/run
// installs the package.
package conformance
