package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTheDockerfileDescribesTheSameImage: the Dockerfile's last stage has
// the configuration this tool writes (user, environment, working
// directory, port, entrypoint, command and labels, the build arguments
// standing for the version), starts from nothing, and copies the files
// this tool embeds. No Docker daemon runs here, so the Dockerfile is read,
// not built.
func TestTheDockerfileDescribesTheSameImage(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	require.NoError(t, err)
	stages := dockerfileStages(string(src))
	require.GreaterOrEqual(t, len(stages), 2, "a build stage and the image")
	last := stages[len(stages)-1]
	assert.Equal(t, "scratch", last.from, "the image starts from nothing, as the tool's does")

	o := options{Version: "$VERSION", Revision: "$COMMIT", Created: time.Unix(0, 0).UTC()}
	want := imageConfig(annotations(o))
	want.Labels["org.opencontainers.image.created"] = "$COMMIT_DATE"
	got := v1.Config{Labels: map[string]string{}, ExposedPorts: map[string]struct{}{}}
	for _, in := range last.instructions {
		switch in.cmd {
		case "USER":
			got.User = in.args
		case "WORKDIR":
			got.WorkingDir = in.args
		case "EXPOSE":
			got.ExposedPorts[in.args] = struct{}{}
		case "ENV":
			for _, kv := range keyValues(t, in.args) {
				got.Env = append(got.Env, kv[0]+"="+kv[1])
			}
		case "LABEL":
			for _, kv := range keyValues(t, in.args) {
				got.Labels[kv[0]] = kv[1]
			}
		case "ENTRYPOINT":
			require.NoError(t, json.Unmarshal([]byte(in.args), &got.Entrypoint), in.args)
		case "CMD":
			require.NoError(t, json.Unmarshal([]byte(in.args), &got.Cmd), in.args)
		}
	}
	assert.Equal(t, want, got)

	build := strings.Join(instructionArgs(stages[0], "RUN"), "\n")
	entries, err := rootfs.ReadDir("rootfs/etc")
	require.NoError(t, err)
	require.NotEmpty(t, entries)
	assert.Contains(t, build, "cp deploy/image/rootfs/etc/* /rootfs/etc/", "the Dockerfile installs the files the tool embeds")
	for _, p := range []string{"/rootfs/" + binPath, "/rootfs/" + playbooks, "/rootfs/" + stateDir, "/rootfs/tmp", "/rootfs/" + filepath.Dir(certsPath)} {
		assert.Contains(t, build, p)
	}
	assert.Contains(t, build, "chmod 1777 /rootfs/tmp")
	assert.Contains(t, build, "chmod 0700 /rootfs/"+stateDir)
	assert.Contains(t, build, "-trimpath -buildvcs=false")
	assert.Contains(t, build, `-ldflags "-s -w -buildid= -X main.version=$VERSION -X main.commit=$COMMIT -X main.commitDate=$COMMIT_DATE"`)
	assert.Contains(t, strings.Join(instructionArgs(last, "COPY"), "\n"), "--chown=65532:65532 /rootfs/"+stateDir+" /"+stateDir)
}

type stage struct {
	from         string
	instructions []instruction
}

type instruction struct{ cmd, args string }

// dockerfileStages splits a Dockerfile into its stages, joining continued
// lines and dropping comments.
func dockerfileStages(src string) []stage {
	var stages []stage
	var line string
	for _, l := range strings.Split(src, "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "#") {
			continue
		}
		if strings.HasSuffix(t, "\\") {
			line += strings.TrimSuffix(t, "\\") + " "
			continue
		}
		line += t
		cmd, args, _ := strings.Cut(strings.TrimSpace(line), " ")
		line = ""
		if cmd == "" {
			continue
		}
		args = strings.TrimSpace(args)
		if strings.EqualFold(cmd, "FROM") {
			f := strings.Fields(args)
			from := f[0]
			for _, w := range f {
				if !strings.HasPrefix(w, "--") {
					from = w
					break
				}
			}
			stages = append(stages, stage{from: from})
			continue
		}
		if len(stages) > 0 {
			s := &stages[len(stages)-1]
			s.instructions = append(s.instructions, instruction{strings.ToUpper(cmd), args})
		}
	}
	return stages
}

func instructionArgs(s stage, cmd string) []string {
	var out []string
	for _, in := range s.instructions {
		if in.cmd == cmd {
			out = append(out, in.args)
		}
	}
	return out
}

// keyValues reads ENV and LABEL's key=value pairs, values plain or in
// double quotes.
func keyValues(t *testing.T, s string) [][2]string {
	t.Helper()
	var out [][2]string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimLeftFunc(s, unicode.IsSpace) {
		k, rest, ok := strings.Cut(s, "=")
		require.True(t, ok, "no = in %q", s)
		var v string
		if strings.HasPrefix(rest, `"`) {
			end := strings.Index(rest[1:], `"`)
			require.GreaterOrEqual(t, end, 0, "unterminated quote in %q", rest)
			v, s = rest[1:end+1], rest[end+2:]
		} else {
			v, s, _ = strings.Cut(rest, " ")
		}
		out = append(out, [2]string{k, v})
	}
	return out
}
