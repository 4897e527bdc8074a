package steps

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
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

// OpenDir opens dir, relative to the playbook directory (Dir), as a root
// of its own, creating it when it is missing: dir cannot leave the
// playbook directory, and nothing below it, symbolic links included, can
// reach outside it. The caller closes it.
func (c *Call) OpenDir(dir string) (*os.Root, error) {
	root, err := os.OpenRoot(c.Dir)
	if err != nil {
		return nil, &fault.Error{Code: fault.Invalid, Message: "open the playbook directory", Err: err}
	}
	defer root.Close()
	if dir != "." {
		if err := root.MkdirAll(dir, 0o700); err != nil {
			return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("create directory %q", dir), Err: err}
		}
	}
	sub, err := root.OpenRoot(dir)
	if err != nil {
		return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("refusing dir %q: it leaves the playbook directory or is not a directory", dir), Err: err}
	}
	return sub, nil
}

// pathReason is a file error's text for people, over the error itself.
type pathReason struct {
	text string
	err  error
}

func (r pathReason) Error() string { return r.text }
func (r pathReason) Unwrap() error { return r.err }
