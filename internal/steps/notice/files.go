package notice

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/runbook/runbook/internal/fault"
)

// maxNameBytes caps a file name (most file systems allow 255 bytes).
const maxNameBytes = 200

// localPath refuses a path that is absolute, empty or climbs out with "..".
func localPath(param, p string) error {
	if p == "" || !filepath.IsLocal(p) || strings.Contains(p, "\\") {
		return &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("refusing %s %q: it leaves the playbook directory", param, p)}
	}
	return nil
}

// parentOf returns the directory part of a relative slash path, or "".
func parentOf(p string) string {
	d := path.Dir(filepath.ToSlash(p))
	if d == "." {
		return ""
	}
	return filepath.FromSlash(d)
}

// fileName checks and tidies a file name for saving: a name that would
// leave the directory (a path separator, "." or "..") is refused; control
// characters are dropped, leading dots and spaces trimmed (no hidden files)
// and the length capped, keeping the extension.
func fileName(name string) (string, error) {
	if strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
		return "", &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("refusing file name %q: it leaves the directory", name)}
	}
	var b strings.Builder
	for _, r := range name {
		if r == utf8.RuneError || unicode.IsControl(r) || r == 0x7f {
			continue
		}
		b.WriteRune(r)
	}
	s := strings.TrimLeft(strings.TrimSpace(b.String()), ". ")
	if len(s) > maxNameBytes {
		ext := filepath.Ext(s)
		if len(ext) > 20 || !utf8.ValidString(ext) {
			ext = ""
		}
		base := s[:maxNameBytes-len(ext)]
		for !utf8.ValidString(base) {
			base = base[:len(base)-1]
		}
		s = base + ext
	}
	if s == "" {
		return "", &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("refusing file name %q: nothing is left after removing control characters and leading dots", name)}
	}
	return s, nil
}

// errTooLarge is returned by writeAtomic when r holds more than max bytes.
var errTooLarge = errors.New("too large")

// writeAtomic copies r to name inside root through a temporary file in the
// same directory, then renames it: readers never see half a file. max < 0
// means no limit; past max the temporary file is deleted and errTooLarge
// returned. Without overwrite an existing name is refused. It returns the
// bytes written and their SHA-256.
func writeAtomic(root *os.Root, name string, r io.Reader, max int64, overwrite bool) error {
	_, _, err := writeAtomicSum(root, name, r, max, overwrite)
	return err
}

func writeAtomicSum(root *os.Root, name string, r io.Reader, max int64, overwrite bool) (int64, string, error) {
	if !overwrite {
		if _, err := root.Lstat(name); err == nil {
			return 0, "", &fault.Error{Code: fault.Conflict, Message: fmt.Sprintf("%q already exists (set overwrite: true to replace it)", name)}
		}
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(parentOf(name), ".runbook-"+hex.EncodeToString(rnd[:])+".tmp")
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, "", &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("create a temporary file for %q", name), Err: err}
	}
	fail := func(err error) (int64, string, error) {
		f.Close()
		_ = root.Remove(tmp)
		return 0, "", err
	}
	h := sha256.New()
	src := r
	if max >= 0 {
		src = io.LimitReader(r, max+1)
	}
	n, err := io.Copy(io.MultiWriter(f, h), src)
	if err != nil {
		return fail(err)
	}
	if max >= 0 && n > max {
		return fail(errTooLarge)
	}
	if err := f.Sync(); err != nil {
		return fail(fmt.Errorf("sync %q: %w", name, err))
	}
	if err := f.Close(); err != nil {
		_ = root.Remove(tmp)
		return 0, "", fmt.Errorf("close %q: %w", name, err)
	}
	if !overwrite {
		if _, err := root.Lstat(name); err == nil {
			_ = root.Remove(tmp)
			return 0, "", &fault.Error{Code: fault.Conflict, Message: fmt.Sprintf("%q already exists (set overwrite: true to replace it)", name)}
		}
	}
	if err := root.Rename(tmp, name); err != nil {
		_ = root.Remove(tmp)
		return 0, "", &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("save %q", name), Err: err}
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}
