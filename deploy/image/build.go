package main

import (
	"archive/tar"
	"bytes"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// rootfs holds the files the image and the Dockerfile share: passwd,
// group and nsswitch.conf.
//
//go:embed rootfs
var rootfs embed.FS

// The image's layout and configuration. The Dockerfile states the same
// (a test compares them).
const (
	uid       = 65532
	user      = "65532:65532"
	binPath   = "usr/local/bin/runbook"
	certsPath = "etc/ssl/certs/ca-certificates.crt"
	stateDir  = "var/lib/runbook"
	playbooks = "etc/runbook/playbooks" // empty: mount playbooks here
	port      = "8088/tcp"
)

// imageConfig is the run configuration of every architecture's image.
func imageConfig(labels map[string]string) v1.Config {
	return v1.Config{
		User: user,
		Env: []string{
			"PATH=/usr/local/bin:/usr/bin:/bin",
			"SSL_CERT_FILE=/" + certsPath,
			"HOME=/" + stateDir,
			"RUNBOOK_STATE=/" + stateDir + "/state.db",
		},
		Entrypoint:   []string{"/" + binPath},
		Cmd:          []string{"serve", "--listen", "0.0.0.0:8088", "--playbooks", "/" + playbooks},
		WorkingDir:   "/" + stateDir,
		ExposedPorts: map[string]struct{}{port: {}},
		Labels:       labels,
	}
}

type options struct {
	Version  string
	Revision string
	Created  time.Time
	Binaries string // path with ARCH standing for the architecture
	Arches   []string
	CACerts  string
	Out      string
	Name     string
}

type result struct {
	Layout   string
	Index    v1.Hash
	Images   map[string]v1.Hash // by architecture
	Tarballs map[string]string  // by architecture
}

// annotations are the OCI annotations of the index and of each image
// manifest, and the labels of each image's configuration.
func annotations(o options) map[string]string {
	a := map[string]string{
		"org.opencontainers.image.title":       "runbook",
		"org.opencontainers.image.description": "Durable workflow automation for operations teams: YAML playbooks of typed steps, run by runbook serve.",
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.created":     o.Created.Format(time.RFC3339),
	}
	if o.Revision != "" {
		a["org.opencontainers.image.revision"] = o.Revision
	}
	return a
}

func build(o options) (result, error) {
	res := result{Layout: filepath.Join(o.Out, "oci"), Images: map[string]v1.Hash{}, Tarballs: map[string]string{}}
	if len(o.Arches) == 0 {
		return res, fmt.Errorf("no architecture")
	}
	certs, err := os.ReadFile(o.CACerts)
	if err != nil {
		return res, fmt.Errorf("CA certificates: %w", err)
	}
	tag, err := name.NewTag(o.Name + ":" + o.Version)
	if err != nil {
		return res, fmt.Errorf("tag: %w", err)
	}
	anns := annotations(o)
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range o.Arches {
		bin, err := os.ReadFile(strings.ReplaceAll(o.Binaries, "ARCH", arch))
		if err != nil {
			return res, fmt.Errorf("binary for %s: %w", arch, err)
		}
		img, err := archImage(o, arch, bin, certs, anns)
		if err != nil {
			return res, fmt.Errorf("image for %s: %w", arch, err)
		}
		if res.Images[arch], err = img.Digest(); err != nil {
			return res, err
		}
		tb := filepath.Join(o.Out, fmt.Sprintf("%s-image-%s-linux-%s.tar", o.Name, o.Version, arch))
		if err := tarball.WriteToFile(tb, tag, img); err != nil {
			return res, fmt.Errorf("docker tarball for %s: %w", arch, err)
		}
		res.Tarballs[arch] = tb
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch, Variant: variant(arch)}},
		})
	}
	idx = mutate.Annotations(idx, anns).(v1.ImageIndex)
	if res.Index, err = idx.Digest(); err != nil {
		return res, err
	}
	// A layout appends to its index.json: start from an empty one.
	if err := os.RemoveAll(res.Layout); err != nil {
		return res, err
	}
	p, err := layout.Write(res.Layout, empty.Index)
	if err != nil {
		return res, fmt.Errorf("OCI layout: %w", err)
	}
	ref := map[string]string{"org.opencontainers.image.ref.name": o.Version}
	if err := p.AppendIndex(idx, layout.WithAnnotations(ref)); err != nil {
		return res, fmt.Errorf("OCI layout: %w", err)
	}
	return res, nil
}

func variant(arch string) string {
	if arch == "arm64" {
		return "v8"
	}
	return ""
}

// archImage is the image of one architecture: one layer, its
// configuration, its labels and annotations.
func archImage(o options, arch string, bin, certs []byte, anns map[string]string) (v1.Image, error) {
	layerTar, err := rootLayer(o.Created, bin, certs)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	if img, err = mutate.AppendLayers(img, layer); err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = "linux", arch, variant(arch)
	cf.Created = v1.Time{Time: o.Created}
	cf.Author = ""
	cf.Config = imageConfig(anns)
	cf.History = []v1.History{{
		Created:   v1.Time{Time: o.Created},
		CreatedBy: "runbook deploy/image: the static binary, CA certificates, user runbook (65532)",
		Comment:   o.Version,
	}}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, err
	}
	return mutate.Annotations(img, anns).(v1.Image), nil
}

// rootLayer is the image's one layer: every file and directory with the
// given time, owned by root except the state directory.
func rootLayer(created time.Time, bin, certs []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(p string, mode int64, owner int) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: mode, Uid: owner, Gid: owner, ModTime: created, Format: tar.FormatUSTAR})
	}
	file := func(p string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: mode, Size: int64(len(data)), ModTime: created, Format: tar.FormatUSTAR}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, d := range []string{"etc", "etc/runbook", playbooks, "etc/ssl", "etc/ssl/certs", "usr", "usr/local", "usr/local/bin", "var", "var/lib"} {
		if err := dir(d, 0o755, 0); err != nil {
			return nil, err
		}
	}
	if err := dir("tmp", 0o1777, 0); err != nil {
		return nil, err
	}
	if err := dir(stateDir, 0o700, uid); err != nil {
		return nil, err
	}
	err := fs.WalkDir(rootfs, "rootfs/etc", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := rootfs.ReadFile(p)
		if err != nil {
			return err
		}
		return file(strings.TrimPrefix(p, "rootfs/"), 0o644, data)
	})
	if err != nil {
		return nil, err
	}
	if err := file(certsPath, 0o644, certs); err != nil {
		return nil, err
	}
	if err := file(binPath, 0o755, bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
