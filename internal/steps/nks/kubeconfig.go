package nks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/runbook/runbook/internal/cloud/nks"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

type kubeconfigParams struct {
	connParam
	clusterParam
	File      string `json:"file" desc:"save the kubeconfig to this path inside the playbook directory (mode 0600) instead of outputting it"`
	Overwrite bool   `json:"overwrite" default:"false" desc:"replace an existing file"`
}

// localFile refuses a path that is absolute, empty or leaves the directory.
func localFile(p string) error {
	if !filepath.IsLocal(p) || strings.Contains(p, `\`) {
		return fmt.Errorf("must be a relative path inside the playbook directory (got %q)", p)
	}
	return nil
}

func init() {
	steps.Register(steps.Define(steps.Def[kubeconfigParams]{
		Type: "nks.cluster.kubeconfig",
		Summary: "Read a cluster's kubeconfig. With file, it is saved inside the playbook directory with mode 0600 " +
			"and only its path is output (the text holds credentials); an existing file is kept unless overwrite is true.",
		SecretOutputs: []string{"kubeconfig"},
		Example:       map[string]any{"cluster": "prod", "file": "kube/config", "overwrite": true},
		Outputs: []steps.Output{
			{Name: "kubeconfig", Type: "string", Description: `the kubeconfig text ("" when saved to file)`},
			{Name: "path", Type: "string", Description: `the file written, relative to the playbook directory ("" without file)`},
		},
		Check: func(p *kubeconfigParams, dyn map[string]bool) []fault.Problem {
			var ps problems
			ps.name(dyn, "cluster", "cluster", p.Cluster)
			if !dyn["file"] && p.File != "" {
				ps.add("file", localFile(p.File))
			}
			return ps
		},
		Plan: func(p *kubeconfigParams) []steps.PlannedCall {
			call := steps.PlannedCall{Method: http.MethodGet, Path: nks.Path("clusters", p.Cluster, "config")}
			if p.File != "" {
				call.Note = "saved to " + p.File
			}
			return []steps.PlannedCall{call}
		},
		Run: func(ctx context.Context, c *steps.Call, p *kubeconfigParams) (steps.Outputs, error) {
			return read(ctx, c, p.Connection, func(cl *nks.Client) (steps.Outputs, error) {
				kc, err := cl.Kubeconfig(ctx, p.Cluster)
				if err != nil {
					return nil, err
				}
				if p.File == "" {
					return steps.Outputs{"kubeconfig": kc, "path": ""}, nil
				}
				if err := saveFile(c.Dir, p.File, []byte(kc), p.Overwrite); err != nil {
					return nil, err
				}
				return steps.Outputs{"kubeconfig": "", "path": filepath.Clean(p.File)}, nil
			})
		},
	}))
}

// saveFile writes data to name below dir with mode 0600, through os.Root
// so that neither ".." nor a symbolic link leads out of dir. Without
// overwrite an existing file is an error; with it the new content goes to
// a temporary file first and is renamed over the old one.
func saveFile(dir, name string, data []byte, overwrite bool) error {
	if err := localFile(name); err != nil {
		return fault.Errorf(fault.Invalid, "file: %s", err.Error())
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("open playbook directory: %w", err)
	}
	defer root.Close()
	name = filepath.Clean(name)
	if parent := filepath.Dir(name); parent != "." {
		if err := root.MkdirAll(parent, 0o700); err != nil {
			return fault.Errorf(fault.Invalid, "create directory for %s: %w", name, err)
		}
	}
	target := name
	if overwrite {
		var b [6]byte
		_, _ = rand.Read(b[:])
		target = name + ".tmp-" + hex.EncodeToString(b[:])
	}
	f, err := root.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fault.Errorf(fault.Conflict, "%s already exists; set overwrite: true to replace it", name)
	}
	if err != nil {
		return fault.Errorf(fault.Invalid, "create %s: %w", name, err)
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = root.Remove(target)
		return fmt.Errorf("write %s: %w", name, err)
	}
	if overwrite {
		if err := root.Rename(target, name); err != nil {
			_ = root.Remove(target)
			return fmt.Errorf("replace %s: %w", name, err)
		}
	}
	return nil
}
