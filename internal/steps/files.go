package steps

import (
	"errors"

	"io/fs"
	"path/filepath"

	"github.com/runbook/runbook/internal/fault"
)

// FileError is the error of a file operation a step made below dir (its
// Call.Dir) on rel: what it did, the file's path resolved against dir,
// and why it failed, without the name of the system call (an os.Root
// reports "mkdirat out: file exists"; this says "create the directory of
// /srv/examples/out/digest.md: /srv/examples/out: file exists"). The
// cause stays reachable with errors.Is and errors.As.
func FileError(code fault.Code, dir, what, rel string, err error) error {
	reason := pathReason{text: err.Error(), err: err}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		p := pe.Path
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		reason.text = p + ": " + pe.Err.Error()
	}
	return fault.Errorf(code, "%s %s: %w", what, filepath.Join(dir, rel), reason)
}

// pathReason is a file error's text for people, over the error itself.
type pathReason struct {
	text string
	err  error
}

func (r pathReason) Error() string { return r.text }
func (r pathReason) Unwrap() error { return r.err }
