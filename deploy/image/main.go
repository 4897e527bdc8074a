// Command image builds runbook's container image without a Docker daemon
// and without pulling a base image: one layer holding the static binary,
// the CA certificates, a passwd and group naming the non-root user runbook
// (65532) and its state directory, for each architecture asked for.
//
// It writes, under -out:
//
//	oci/                                        an OCI image layout: one index of every architecture, tagged with the version
//	runbook-image-VERSION-linux-ARCH.tar        a docker load-able tarball per architecture, tagged runbook:VERSION
//
// Every time and name in the image comes from its inputs (the commit's
// time, never the clock), so the same binaries give the same digests.
// The Dockerfile at the repository's root builds the same filesystem and
// configuration with Docker.
//
//	go run ./image -version v1.2.3 -revision COMMIT -created 2026-11-29T00:00:00Z \
//	    -binaries ../dist/runbook-v1.2.3-linux-ARCH -arches 'amd64 arm64' -out ../dist
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

func main() {
	var o options
	var created, arches string
	flag.StringVar(&o.Version, "version", "", "the version the image is labelled and tagged with (required)")
	flag.StringVar(&o.Revision, "revision", "", "the commit the binaries were built from")
	flag.StringVar(&created, "created", "", "the image's creation time, RFC 3339 (the commit's time, so that builds reproduce; required)")
	flag.StringVar(&o.Binaries, "binaries", "", "path of the static linux binary, ARCH standing for the architecture (required)")
	flag.StringVar(&arches, "arches", "amd64 arm64", "architectures, space-separated")
	flag.StringVar(&o.CACerts, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "the CA certificate bundle to install")
	flag.StringVar(&o.Out, "out", "dist", "output directory")
	flag.StringVar(&o.Name, "name", "runbook", "the repository name of the docker tarballs' tag")
	flag.Parse()
	if o.Version == "" || created == "" || o.Binaries == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: image -version V -created RFC3339 -binaries PATH-WITH-ARCH [-arches 'amd64 arm64'] [-out DIR]")
		os.Exit(2)
	}
	t, err := time.Parse(time.RFC3339, created)
	if err != nil {
		fmt.Fprintln(os.Stderr, "image: -created:", err)
		os.Exit(2)
	}
	o.Created = t.UTC()
	o.Arches = strings.Fields(arches)
	res, err := build(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Printf("%s  %s (index of %s)\n", res.Index, res.Layout, strings.Join(o.Arches, ", "))
	for _, a := range o.Arches {
		fmt.Printf("%s  %s\n", res.Images[a], res.Tarballs[a])
	}
}
