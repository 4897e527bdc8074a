package objectstorage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/runbook/runbook/internal/cloud/objectstorage"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

type uploadParams struct {
	connParams
	URI             string `json:"uri" required:"true" maxlen:"255" pattern:"^obs://" desc:"destination obs://{host}/v1/AUTH_{tenant}/{container}/{object}; a directory, or a file into a URI ending in /, goes below it as a prefix"`
	Path            string `json:"path" required:"true" maxlen:"1024" desc:"local file or directory, relative to the playbook directory (never leaving it)"`
	Overwrite       bool   `json:"overwrite" default:"true" desc:"replace existing objects; when false an object with other contents is a conflict (checked before anything is sent)"`
	CreateContainer bool   `json:"create_container" desc:"create the container when it does not exist"`
	MaxFiles        int64  `json:"max_files" default:"10000" min:"1" max:"100000" desc:"most files one upload sends"`
	MaxBytes        int64  `json:"max_bytes" min:"1" desc:"most bytes one upload sends (default: no limit beyond 5 GiB per object)"`
}

var transferOutputs = []steps.Output{
	{Name: "bytes", Type: "integer", Description: "bytes transferred"},
}

func init() {
	steps.Register(steps.Define(steps.Def[uploadParams]{
		Type: "objectstorage.upload",
		Summary: "Upload a file or a directory tree (below the playbook directory) to object storage: each file streamed " +
			"with its MD5 checked by the server, retried on 429/5xx. Idempotent: resuming re-uploads.",
		Example: map[string]any{"uri": "obs://kr1-api-object-storage.nhncloudservice.com/v1/AUTH_9f8e7d6c5b4a/ml/models/mnist/",
			"path": "out/model", "overwrite": false},
		Outputs: append([]steps.Output{
			{Name: "objects", Type: "integer", Description: "how many objects were written"},
			{Name: "uris", Type: "list", Description: "obs:// URI of each object written"},
		}, transferOutputs...),
		Mutating:  true,
		Check:     checkUpload,
		Run:       runUpload,
		Reconcile: reconcileUpload,
		Plan: func(p *uploadParams) []steps.PlannedCall {
			var out []steps.PlannedCall
			if p.CreateContainer {
				out = append(out, steps.PlannedCall{Method: "PUT", Path: "/v1/AUTH_{tenant}/{container}", Note: "create the container if missing"})
			}
			if !p.Overwrite {
				out = append(out, steps.PlannedCall{Method: "HEAD", Path: "/v1/AUTH_{tenant}/{container}/{object}", Note: "for each file: refuse other contents"})
			}
			return append(out, steps.PlannedCall{Method: "PUT", Path: "/v1/AUTH_{tenant}/{container}/{object}", Note: "for each file below " + p.Path + " to " + p.URI})
		},
	}))
}

func checkUpload(p *uploadParams, dynamic map[string]bool) []fault.Problem {
	var out []fault.Problem
	if !dynamic["uri"] {
		out = append(out, checkURI("uri", p.URI)...)
	}
	if !dynamic["path"] && p.Path != "." {
		out = append(out, checkLocal("path", p.Path)...)
	}
	return out
}

func (p *uploadParams) options() objectstorage.Options {
	return objectstorage.Options{Overwrite: p.Overwrite, CreateContainer: p.CreateContainer, MaxFiles: int(p.MaxFiles), MaxBytes: p.MaxBytes}
}

// prepare checks the params again (they may come from expressions) and
// opens the playbook directory and the client.
func prepare(c *steps.Call, p *uploadParams) (*os.Root, *objectstorage.Client, error) {
	if ps := checkUpload(p, nil); len(ps) > 0 {
		return nil, nil, fault.ProblemsError(c.StepID, ps)
	}
	root, err := os.OpenRoot(c.Dir)
	if err != nil {
		return nil, nil, &fault.Error{Code: fault.Invalid, Message: "open the playbook directory", Err: err}
	}
	cl, err := clientFor(c, p.Connection)
	if err != nil {
		root.Close()
		return nil, nil, err
	}
	return root, cl, nil
}

func runUpload(ctx context.Context, c *steps.Call, p *uploadParams) (steps.Outputs, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	root, cl, err := prepare(c, p)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	c.Log.Info("uploading", "path", p.Path, "uri", p.URI)
	res, err := cl.UploadFrom(ctx, p.URI, root, filepath.ToSlash(p.Path), p.options())
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if len(res.Items) > 0 {
			return nil, fmt.Errorf("after %d of the objects were written: %w", len(res.Items), err)
		}
		return nil, err
	}
	return uploadOutputs(res), nil
}

func uploadOutputs(res objectstorage.Result) steps.Outputs {
	uris := make([]any, len(res.Items))
	for i, it := range res.Items {
		uris[i] = it.URI
	}
	return steps.Outputs{"objects": len(res.Items), "bytes": res.Bytes, "uris": uris}
}

// reconcileUpload adopts an earlier attempt that stored every file with
// the same bytes (checked by MD5); otherwise the step runs again, which is
// safe: uploads are idempotent PUTs, and without overwrite an object that
// already holds the file's bytes is not a conflict.
func reconcileUpload(ctx context.Context, c *steps.Call, p *uploadParams, _ steps.Intent) (steps.Outputs, bool, error) {
	root, cl, err := prepare(c, p)
	if err != nil {
		return nil, false, err
	}
	defer root.Close()
	res, found, err := cl.Verify(ctx, p.URI, root, filepath.ToSlash(p.Path), p.options())
	if err != nil || !found {
		// Unknown or incomplete: upload again.
		return nil, false, nil
	}
	return uploadOutputs(res), true, nil
}
