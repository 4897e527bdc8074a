//go:build soak

package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTheImageHoldsAStaticBinaryForEachArchitecture builds the image for
// amd64 and arm64 as `make image` does (the default suite builds this
// machine's architecture only): the index names both platforms, each image
// holds a static binary of its architecture, and each tarball is under
// 40 MB.
func TestTheImageHoldsAStaticBinaryForEachArchitecture(t *testing.T) {
	dist, version := makeImage(t, "amd64", "arm64")
	idx := layoutIndex(t, filepath.Join(dist, "oci"), version)
	im, err := idx.IndexManifest()
	require.NoError(t, err)
	require.Len(t, im.Manifests, 2)
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	for _, d := range im.Manifests {
		arch := d.Platform.Architecture
		img, err := idx.Image(d.Digest)
		require.NoError(t, err)
		cf, err := img.ConfigFile()
		require.NoError(t, err)
		assert.Equal(t, arch, cf.Architecture)
		bin := fileInImage(t, img, binPath)
		f, err := elf.NewFile(bytes.NewReader(bin))
		require.NoError(t, err, arch)
		assert.Equal(t, machines[arch], f.Machine, arch)
		for _, p := range f.Progs {
			assert.NotEqual(t, elf.PT_INTERP, p.Type, "%s: the binary is static", arch)
		}
		st, err := os.Stat(filepath.Join(dist, fmt.Sprintf("runbook-image-%s-linux-%s.tar", version, arch)))
		require.NoError(t, err)
		assert.Less(t, st.Size(), int64(maxImageBytes), arch)
		t.Logf("image %s: docker tarball %.1f MB", arch, float64(st.Size())/1e6)
	}
}

// fileInImage reads one file of the image's filesystem.
func fileInImage(t *testing.T, img v1.Image, path string) []byte {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		require.NotEqual(t, io.EOF, err, "no %s in the image", path)
		require.NoError(t, err)
		if h.Name == path {
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			return b
		}
	}
}
