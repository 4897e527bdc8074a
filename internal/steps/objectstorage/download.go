package objectstorage

import (
	"context"
	"path/filepath"

	"github.com/runbook/runbook/internal/cloud/objectstorage"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

type downloadParams struct {
	connParams
	URI       string `json:"uri" required:"true" maxlen:"255" pattern:"^obs://" desc:"an object, or a prefix ending in / (every object below it), obs://{host}/v1/AUTH_{tenant}/{container}/{object}"`
	Dir       string `json:"dir" default:"." maxlen:"1024" desc:"directory to save into, relative to the playbook directory (created 0700; never left)"`
	Overwrite bool   `json:"overwrite" desc:"replace existing files; otherwise one existing file refuses the whole download before anything is written"`
	MaxFiles  int64  `json:"max_files" default:"10000" min:"1" max:"100000" desc:"most objects one download saves"`
	MaxBytes  int64  `json:"max_bytes" min:"1" desc:"most bytes one download saves (default: no limit beyond 5 GiB per object)"`
}

func init() {
	steps.Register(steps.Define(steps.Def[downloadParams]{
		Type: "objectstorage.download",
		Summary: "Download an object, or every object below a prefix, into a directory below the playbook's: names that " +
			"would leave it are refused, files written 0600, MD5 checked against the ETag, existing files kept unless overwrite.",
		Example: map[string]any{"uri": "obs://kr1-api-object-storage.nhncloudservice.com/v1/AUTH_9f8e7d6c5b4a/ml/datasets/mnist/",
			"dir": "data", "overwrite": true},
		Outputs: append([]steps.Output{
			{Name: "files", Type: "integer", Description: "how many files were saved"},
			{Name: "paths", Type: "list", Description: "each saved file, relative to the playbook directory"},
		}, transferOutputs...),
		Check: checkDownload,
		Run:   runDownload,
		Plan: func(p *downloadParams) []steps.PlannedCall {
			return []steps.PlannedCall{
				{Method: "GET", Path: "/v1/AUTH_{tenant}/{container}?format=json&prefix={object}", Note: "list a prefix (HEAD for one object)"},
				{Method: "GET", Path: "/v1/AUTH_{tenant}/{container}/{object}", Note: "for each object of " + p.URI + " into " + p.Dir},
			}
		},
	}))
}

func checkDownload(p *downloadParams, dynamic map[string]bool) []fault.Problem {
	var out []fault.Problem
	if !dynamic["uri"] {
		out = append(out, checkURI("uri", p.URI)...)
	}
	if !dynamic["dir"] && p.Dir != "." {
		out = append(out, checkLocal("dir", p.Dir)...)
	}
	return out
}

func runDownload(ctx context.Context, c *steps.Call, p *downloadParams) (steps.Outputs, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if ps := checkDownload(p, nil); len(ps) > 0 {
		return nil, fault.ProblemsError(c.StepID, ps)
	}
	cl, err := clientFor(c, p.Connection)
	if err != nil {
		return nil, err
	}
	sub, err := c.OpenDir(p.Dir)
	if err != nil {
		return nil, err
	}
	defer sub.Close()
	c.Log.Info("downloading", "uri", p.URI, "dir", p.Dir)
	res, err := cl.DownloadTo(ctx, p.URI, sub, objectstorage.Options{Overwrite: p.Overwrite, MaxFiles: int(p.MaxFiles), MaxBytes: p.MaxBytes})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	paths := make([]any, len(res.Items))
	for i, it := range res.Items {
		paths[i] = filepath.ToSlash(filepath.Join(p.Dir, filepath.FromSlash(it.Path)))
	}
	return steps.Outputs{"files": len(res.Items), "bytes": res.Bytes, "paths": paths}, nil
}
