package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// repoRoot is the runbook checkout this module sits in.
const repoRoot = "../.."

// maxImageBytes is the bound on the image: a docker tarball (one
// architecture) under 40 MB.
const maxImageBytes = 40 << 20

// need fails the test under CI (where every part must be there) and skips
// it elsewhere.
func need(t *testing.T, ok bool, what string) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: this test may not skip)", what)
	}
	t.Skip(what)
}

func git(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", repoRoot}, args...)...).Output()
	require.NoError(t, err, "git %v", args)
	return strings.TrimSpace(string(out))
}

// makeImage runs `make image` for the arches into a fresh dist directory
// and returns the directory and the version make stamped.
func makeImage(t *testing.T, arches ...string) (dist, version string) {
	t.Helper()
	_, err := exec.LookPath("make")
	need(t, err == nil, "make is not installed")
	dist = t.TempDir()
	out, err := exec.Command("make", "-s", "-C", repoRoot, "version").Output()
	require.NoError(t, err)
	version = strings.TrimSpace(string(out))
	cmd := exec.Command("make", "-C", repoRoot, "DIST="+dist, "IMAGE_ARCHES="+strings.Join(arches, " "), "image")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "make image:\n%s", b)
	return dist, version
}

// layoutIndex reads the OCI layout's index of every architecture, the
// one entry tagged with the version.
func layoutIndex(t *testing.T, dir, version string) v1.ImageIndex {
	t.Helper()
	top, err := layout.ImageIndexFromPath(dir)
	require.NoError(t, err)
	m, err := top.IndexManifest()
	require.NoError(t, err)
	require.Len(t, m.Manifests, 1, "index.json names one index")
	assert.Equal(t, version, m.Manifests[0].Annotations["org.opencontainers.image.ref.name"])
	idx, err := top.ImageIndex(m.Manifests[0].Digest)
	require.NoError(t, err)
	return idx
}

// TestTheImageRunsRunbookAsItsNonRootUser builds the image for this
// machine's architecture as `make image` does, checks its labels, user,
// files and size, unpacks its filesystem and runs the binary from it as
// a container runtime would: chrooted into it, as the image's user, with
// the image's environment and working directory. `version` names the
// commit make stamped; `serve --sim` answers /healthz and writes its
// state in the image's state directory.
func TestTheImageRunsRunbookAsItsNonRootUser(t *testing.T) {
	arch := runtime.GOARCH
	dist, version := makeImage(t, arch)
	commit := git(t, "rev-parse", "HEAD")
	created := git(t, "show", "-s", "--format=%cI", "HEAD")
	createdAt, err := time.Parse(time.RFC3339, created)
	require.NoError(t, err)

	idx := layoutIndex(t, filepath.Join(dist, "oci"), version)
	require.NoError(t, validate.Index(idx), "every blob of the layout is there, with its digest and size")
	im, err := idx.IndexManifest()
	require.NoError(t, err)
	require.Len(t, im.Manifests, 1)
	assert.Equal(t, v1.Platform{OS: "linux", Architecture: arch, Variant: variant(arch)}, *im.Manifests[0].Platform)
	assert.Equal(t, version, im.Annotations["org.opencontainers.image.version"])
	assert.Equal(t, commit, im.Annotations["org.opencontainers.image.revision"])
	assert.Equal(t, createdAt.UTC().Format(time.RFC3339), im.Annotations["org.opencontainers.image.created"])
	img, err := idx.Image(im.Manifests[0].Digest)
	require.NoError(t, err)
	man, err := img.Manifest()
	require.NoError(t, err)
	assert.Equal(t, version, man.Annotations["org.opencontainers.image.version"])
	assert.Equal(t, commit, man.Annotations["org.opencontainers.image.revision"])
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, "65532:65532", cf.Config.User, "the image runs as a non-root user")
	assert.Equal(t, version, cf.Config.Labels["org.opencontainers.image.version"])
	assert.True(t, cf.Created.Equal(createdAt), "created at the commit's time, not the build's: %v", cf.Created)

	// The docker tarball holds the same image, tagged with the version.
	tb := filepath.Join(dist, fmt.Sprintf("runbook-image-%s-linux-%s.tar", version, arch))
	st, err := os.Stat(tb)
	require.NoError(t, err)
	assert.Less(t, st.Size(), int64(maxImageBytes), "the image is under 40 MB")
	t.Logf("image %s: docker tarball %.1f MB", arch, float64(st.Size())/1e6)
	tag, err := name.NewTag("runbook:" + version)
	require.NoError(t, err)
	dimg, err := tarball.ImageFromPath(tb, &tag)
	require.NoError(t, err)
	cn, err := img.ConfigName()
	require.NoError(t, err)
	dcn, err := dimg.ConfigName()
	require.NoError(t, err)
	assert.Equal(t, cn, dcn, "the docker tarball has the layout's configuration")
	dm, err := dimg.Manifest()
	require.NoError(t, err)
	require.Len(t, dm.Layers, len(man.Layers))
	for i := range man.Layers {
		assert.Equal(t, man.Layers[i].Digest, dm.Layers[i].Digest, "layer %d", i)
	}

	root := unpack(t, img)
	pem, err := os.ReadFile(filepath.Join(root, certsPath))
	require.NoError(t, err)
	assert.True(t, x509.NewCertPool().AppendCertsFromPEM(pem), "the image holds CA certificates")
	passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	require.NoError(t, err)
	assert.Contains(t, string(passwd), "runbook:x:65532:65532:")

	need(t, os.Geteuid() == 0, "running the image's filesystem chrooted needs root")
	out := runInImage(t, root, cf.Config, "version", "--json")
	var v struct {
		Version    string `json:"version"`
		Commit     string `json:"commit"`
		CommitDate string `json:"commit_date"`
		Platform   string `json:"platform"`
	}
	require.NoError(t, json.Unmarshal(out, &v), string(out))
	assert.Equal(t, version, v.Version)
	assert.Equal(t, commit, v.Commit)
	assert.Equal(t, createdAt.UTC().Format(time.RFC3339), v.CommitDate)
	assert.Equal(t, "linux/"+arch, v.Platform)
	text := string(runInImage(t, root, cf.Config, "version"))
	assert.Contains(t, text, "runbook "+version+"\n")
	wantCommit := commit
	if strings.HasSuffix(version, "-dirty") {
		wantCommit += " (modified)" // built from a work tree with changes
	}
	assert.Contains(t, text, "commit:       "+wantCommit+"\n")
	assert.Contains(t, text, "commit date:  "+createdAt.UTC().Format(time.RFC3339)+"\n")

	serveInImage(t, root, cf.Config)
	fi, err := os.Stat(filepath.Join(root, stateDir, "state.db"))
	require.NoError(t, err, "serve wrote its state in the image's state directory")
	assert.Equal(t, uint32(uid), fi.Sys().(*syscall.Stat_t).Uid, "as the image's user")
}

// TestTheImageIsTheSameFromTheSameBinary: two builds from one binary and
// one commit time are the same bytes, and so the same digests.
func TestTheImageIsTheSameFromTheSameBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "runbook-linux-ARCH")
	// Any file stands for the binary: the image does not look into it.
	require.NoError(t, os.WriteFile(strings.ReplaceAll(bin, "ARCH", "amd64"), bytes.Repeat([]byte("runbook"), 1<<16), 0o755))
	require.NoError(t, os.WriteFile(strings.ReplaceAll(bin, "ARCH", "arm64"), bytes.Repeat([]byte("arm64"), 1<<16), 0o755))
	o := options{Version: "v1.2.3", Revision: "abc", Created: time.Date(2026, 11, 29, 1, 2, 3, 0, time.UTC),
		Binaries: bin, Arches: []string{"amd64", "arm64"}, CACerts: "/etc/ssl/certs/ca-certificates.crt", Name: "runbook"}
	_, err := os.Stat(o.CACerts)
	need(t, err == nil, "no CA certificates at "+o.CACerts+" (Debian's ca-certificates)")
	var results []result
	for range 2 {
		o.Out = t.TempDir()
		res, err := build(o)
		require.NoError(t, err)
		results = append(results, res)
	}
	assert.Equal(t, results[0].Index, results[1].Index)
	assert.Equal(t, results[0].Images, results[1].Images)
	for _, arch := range o.Arches {
		a, err := os.ReadFile(results[0].Tarballs[arch])
		require.NoError(t, err)
		b, err := os.ReadFile(results[1].Tarballs[arch])
		require.NoError(t, err)
		assert.True(t, bytes.Equal(a, b), "the %s tarballs differ", arch)
	}
	assert.NotEqual(t, results[0].Images["amd64"], results[0].Images["arm64"])
}

// unpack writes the image's filesystem into a directory, with the modes
// and owners its layer gives.
func unpack(t *testing.T, img v1.Image) string {
	t.Helper()
	root := t.TempDir()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		p := filepath.Join(root, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			require.NoError(t, os.MkdirAll(p, 0o755))
		case tar.TypeReg:
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
			require.NoError(t, err)
			_, err = io.Copy(f, tr)
			require.NoError(t, err)
			require.NoError(t, f.Close())
		default:
			t.Fatalf("unexpected entry %s of type %c", h.Name, h.Typeflag)
		}
		require.NoError(t, os.Chmod(p, os.FileMode(h.Mode&0o777)|modeBits(h.Mode)))
		if os.Geteuid() == 0 {
			require.NoError(t, os.Lchown(p, h.Uid, h.Gid))
		}
	}
	return root
}

func modeBits(m int64) os.FileMode {
	if m&0o1000 != 0 {
		return os.ModeSticky
	}
	return 0
}

// inImage is a command run as the image would run it: chrooted into its
// filesystem, as its user, in its working directory, with its
// environment and nothing else.
func inImage(root string, cfg v1.Config, args ...string) *exec.Cmd {
	cmd := &exec.Cmd{Path: cfg.Entrypoint[0], Args: append([]string{cfg.Entrypoint[0]}, args...), Dir: cfg.WorkingDir, Env: cfg.Env}
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	return cmd
}

func runInImage(t *testing.T, root string, cfg v1.Config, args ...string) []byte {
	t.Helper()
	var stderr bytes.Buffer
	cmd := inImage(root, cfg, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "runbook %v: %s", args, stderr.String())
	return out
}

// serveInImage runs the image's command with --sim and a loopback port,
// waits for /healthz and /readyz, then stops it with SIGTERM as a runtime
// does.
func serveInImage(t *testing.T, root string, cfg v1.Config) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	args := append([]string(nil), cfg.Cmd...)
	for i := range args {
		if args[i] == "--listen" {
			args[i+1] = addr // the image listens on every interface; the test on loopback
		}
	}
	args = append(args, "--sim")
	var logs bytes.Buffer
	cmd := inImage(root, cfg, args...)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var health map[string]any
	for health == nil {
		select {
		case err := <-exited:
			t.Fatalf("runbook %v exited before answering /healthz: %v\n%s", args, err, logs.String())
		case <-ctx.Done():
			t.Fatalf("no /healthz answer in 60 s\n%s", logs.String())
		case <-time.After(100 * time.Millisecond):
		}
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			continue
		}
		if resp.StatusCode == http.StatusOK {
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&health))
		}
		resp.Body.Close()
	}
	assert.Equal(t, "ok", health["status"])
	resp, err := http.Get("http://" + addr + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "/readyz")

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		assert.NoError(t, err, "runbook serve stops cleanly on SIGTERM\n%s", logs.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("runbook serve did not stop within 60 s of SIGTERM\n%s", logs.String())
	}
}
