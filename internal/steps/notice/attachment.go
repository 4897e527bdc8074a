package notice

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/runbook/runbook/internal/cloud/helpcenter"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

type attachmentParams struct {
	connParams
	NoticeID   int64  `json:"notice_id" required:"true" min:"1" desc:"notice the file is attached to"`
	Attachment string `json:"attachment" required:"true" maxlen:"1024" desc:"attachment ID (attachments[].attachmentId) or file name"`
	Dir        string `json:"dir" default:"." maxlen:"1024" desc:"directory to save into, relative to the playbook directory (created 0700)"`
	Name       string `json:"name" maxlen:"255" desc:"file name to save as (default: the attachment's own)"`
	MaxBytes   int64  `json:"max_bytes" default:"20971520" min:"1" max:"1073741824" desc:"largest file accepted; a bigger one is refused and nothing is kept"`
	Overwrite  bool   `json:"overwrite" desc:"replace an existing file"`
	Download   bool   `json:"download" default:"true" desc:"ask for the file as a download (type=download) rather than to open"`
}

func init() {
	steps.Register(steps.Define(steps.Def[attachmentParams]{
		Type: "notice.attachment",
		Summary: "Save a notice's attachment into a directory below the playbook's: the name is checked (nothing " +
			"leaves the directory), the size limited, an existing file kept unless overwrite; written 0600.",
		Example: map[string]any{"notice_id": 12, "attachment": "maintenance-2026-12.pdf", "dir": "downloads"},
		Outputs: []steps.Output{
			{Name: "path", Type: "string", Description: "the saved file, relative to the playbook directory"},
			{Name: "bytes", Type: "integer", Description: "its size"},
			{Name: "content_type", Type: "string", Description: "its media type"},
			{Name: "sha256", Type: "string", Description: "hex SHA-256 of its contents"},
		},
		Check: checkAttachment,
		Plan: func(*attachmentParams) []steps.PlannedCall {
			return []steps.PlannedCall{
				{Method: "GET", Path: "/{serviceId}/api/v2/notice/detail/{id}.json", Note: "find the attachment"},
				{Method: "GET", Path: "/{serviceId}/api/v2/notice/attachments/{attachmentId}"},
			}
		},
		Run: runAttachment,
	}))
}

func checkAttachment(p *attachmentParams, dynamic map[string]bool) []fault.Problem {
	var out []fault.Problem
	if !dynamic["dir"] && p.Dir != "." {
		if err := localPath("dir", p.Dir); err != nil {
			out = append(out, fault.Problem{Path: "dir", Message: "must be a relative path inside the playbook directory (no .., not absolute)"})
		}
	}
	if !dynamic["name"] && p.Name != "" {
		if _, err := fileName(p.Name); err != nil {
			out = append(out, fault.Problem{Path: "name", Message: err.Error()})
		}
	}
	return out
}

func runAttachment(ctx context.Context, c *steps.Call, p *attachmentParams) (steps.Outputs, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p.Dir != "." {
		if err := localPath("dir", p.Dir); err != nil {
			return nil, err
		}
	}
	cl, err := openClient(c, p.Connection)
	if err != nil {
		return nil, err
	}
	d, err := cl.Notice(ctx, int(p.NoticeID), p.Language)
	if err != nil {
		return nil, err
	}
	att, err := findAttachment(d, p.Attachment)
	if err != nil {
		return nil, err
	}
	name := p.Name
	if name == "" {
		name = att.FileName
	}
	if name, err = fileName(name); err != nil {
		if p.Name == "" {
			err = fmt.Errorf("%w (set name to save it under another name)", err)
			return nil, &fault.Error{Code: fault.Invalid, Message: err.Error()}
		}
		return nil, err
	}
	if att.Size > p.MaxBytes {
		return nil, tooLarge(p.MaxBytes)
	}

	sub, err := c.OpenDir(p.Dir)
	if err != nil {
		return nil, err
	}
	defer sub.Close()
	if !p.Overwrite {
		if _, err := sub.Lstat(name); err == nil {
			return nil, &fault.Error{Code: fault.Conflict, Message: fmt.Sprintf("%q already exists (set overwrite: true to replace it)", filepath.Join(p.Dir, name))}
		}
	}

	body, info, err := cl.Attachment(ctx, att.ID, p.Download)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	if info.Size > p.MaxBytes {
		return nil, tooLarge(p.MaxBytes)
	}
	n, sum, err := writeAtomicSum(sub, name, ctxReader{ctx, body}, p.MaxBytes, p.Overwrite)
	switch {
	case errors.Is(err, errTooLarge):
		return nil, tooLarge(p.MaxBytes)
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		var se *fault.Error
		if errors.As(err, &se) {
			return nil, err
		}
		return nil, &fault.Error{Code: fault.Unavailable, Message: fmt.Sprintf("download attachment %s", att.ID), Err: err}
	}
	ct := info.ContentType
	if ct == "" {
		ct = att.ContentType
	}
	return steps.Outputs{"path": filepath.Join(p.Dir, name), "bytes": n, "content_type": ct, "sha256": sum}, nil
}

func tooLarge(max int64) error {
	return &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("attachment is larger than %d bytes", max),
		Data: map[string]any{"max_bytes": max}}
}

// findAttachment picks the attachment by ID, else by exact file name.
func findAttachment(d *helpcenter.NoticeDetail, want string) (helpcenter.Attachment, error) {
	for _, a := range d.Attachments {
		if a.ID == want {
			return a, nil
		}
	}
	for _, a := range d.Attachments {
		if a.FileName == want {
			return a, nil
		}
	}
	names := make([]string, len(d.Attachments))
	for i, a := range d.Attachments {
		names[i] = fmt.Sprintf("%s (%s)", a.ID, a.FileName)
	}
	return helpcenter.Attachment{}, &fault.Error{Code: fault.NotFound,
		Message: fmt.Sprintf("notice %d has no attachment %q (it has: %v)", d.ID, want, names)}
}

// ctxReader stops a copy when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   interface{ Read([]byte) (int, error) }
}

func (r ctxReader) Read(b []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(b)
}
