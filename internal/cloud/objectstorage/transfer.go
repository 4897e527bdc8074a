package objectstorage

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/runbook/runbook/internal/fault"
)

// Options bound and shape a transfer.
type Options struct {
	// Overwrite replaces existing objects (upload) or files (download).
	// Without it an upload refuses an existing object unless it holds the
	// same bytes (an earlier attempt's), and a download refuses an
	// existing file; either is checked before anything is transferred.
	Overwrite bool
	// CreateContainer creates a missing container before an upload.
	CreateContainer bool
	// MaxFiles bounds the files or objects of one transfer (default
	// DefaultMaxFiles).
	MaxFiles int
	// MaxBytes bounds the bytes of one transfer (0: no bound beyond
	// MaxObjectSize per object).
	MaxBytes int64
}

func (o Options) maxFiles() int {
	if o.MaxFiles <= 0 {
		return DefaultMaxFiles
	}
	return o.MaxFiles
}

// Item is one object transferred.
type Item struct {
	URI   string `json:"uri"`
	Path  string `json:"path"` // local, relative to the root, slash separated
	Bytes int64  `json:"bytes"`
	ETag  string `json:"etag"`
}

// Result is what a transfer moved.
type Result struct {
	Items []Item
	Bytes int64
}

// URIs returns the URIs of the items.
func (r Result) URIs() []string {
	out := make([]string, len(r.Items))
	for i, it := range r.Items {
		out[i] = it.URI
	}
	return out
}

// Paths returns the local paths of the items.
func (r Result) Paths() []string {
	out := make([]string, len(r.Items))
	for i, it := range r.Items {
		out[i] = it.Path
	}
	return out
}

// Upload sends the file or directory at localPath to uri. It is
// UploadFrom with a root at localPath's directory.
func (c *Client) Upload(ctx context.Context, uri, localPath string, o Options) (Result, error) {
	dir, name := filepath.Split(filepath.Clean(localPath))
	if dir == "" {
		dir = "."
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Result{}, &fault.Error{Code: fault.Invalid, Message: "objectstorage: open " + dir, Err: err}
	}
	defer root.Close()
	return c.UploadFrom(ctx, uri, root, name, o)
}

// localFile is one file to upload.
type localFile struct {
	rel    string // below the root, slash separated
	object string
	size   int64
	md5    string
}

// UploadFrom sends name, a file or a directory below root, to uri. A file
// goes to uri's object, or below it when uri names a prefix (ends in "/"
// or names only a container). A directory's files go below uri as a prefix
// (a "/" is added), each named by its path relative to the directory.
// Nothing is read outside root: a symbolic link is followed only when it
// stays inside (a link to a directory is refused). Each file is read twice,
// to compute its MD5 (sent as ETag, checked by the server) and to send
// it: nothing is held in memory.
func (c *Client) UploadFrom(ctx context.Context, uri string, root *os.Root, name string, o Options) (Result, error) {
	u, err := Parse(uri)
	if err != nil {
		return Result{}, &fault.Error{Code: fault.Invalid, Message: err.Error()}
	}
	files, err := collect(ctx, root, name, u, o)
	if err != nil {
		return Result{}, err
	}
	if o.CreateContainer {
		exists, err := c.ContainerExists(ctx, u)
		if err != nil {
			return Result{}, err
		}
		if !exists {
			if err := c.CreateContainer(ctx, u); err != nil {
				return Result{}, err
			}
		}
	}
	if !o.Overwrite {
		for _, f := range files {
			info, found, err := c.Head(ctx, objectAt(u, f.object))
			if err != nil {
				return Result{}, err
			}
			if found && strings.Trim(info.ETag, `"`) != f.md5 {
				return Result{}, &fault.Error{Code: fault.Conflict, Data: map[string]any{"uri": objectAt(u, f.object).String()},
					Message: fmt.Sprintf("objectstorage: %s already exists with other contents (set overwrite: true to replace it)", objectAt(u, f.object))}
			}
		}
	}
	var res Result
	for _, f := range files {
		etag, err := c.put(ctx, root, u, f)
		if err != nil {
			if fault.CodeOf(err) == fault.NotFound {
				return res, &fault.Error{Code: fault.NotFound, Data: map[string]any{"container": u.Container},
					Message: fmt.Sprintf("objectstorage: container %q does not exist in %s (create it, or set create_container: true)", u.Container, u.Account), Err: err}
			}
			return res, err
		}
		res.Items = append(res.Items, Item{URI: objectAt(u, f.object).String(), Path: f.rel, Bytes: f.size, ETag: etag})
		res.Bytes += f.size
	}
	return res, nil
}

// Verify reports whether every file UploadFrom would send is stored at uri
// with the same MD5 (an earlier upload completed), and what it holds.
func (c *Client) Verify(ctx context.Context, uri string, root *os.Root, name string, o Options) (Result, bool, error) {
	u, err := Parse(uri)
	if err != nil {
		return Result{}, false, &fault.Error{Code: fault.Invalid, Message: err.Error()}
	}
	files, err := collect(ctx, root, name, u, o)
	if err != nil {
		return Result{}, false, err
	}
	var res Result
	for _, f := range files {
		ou := objectAt(u, f.object)
		info, found, err := c.Head(ctx, ou)
		if err != nil {
			return Result{}, false, err
		}
		if !found || strings.Trim(info.ETag, `"`) != f.md5 {
			return Result{}, false, nil
		}
		res.Items = append(res.Items, Item{URI: ou.String(), Path: f.rel, Bytes: f.size, ETag: f.md5})
		res.Bytes += f.size
	}
	return res, true, nil
}

func objectAt(u URI, object string) URI {
	u.Object = object
	return u
}

// collect lists the files to upload with their object names, sizes and
// MD5s, refusing what breaks a limit before anything is sent.
func collect(ctx context.Context, root *os.Root, name string, u URI, o Options) ([]localFile, error) {
	name = filepath.ToSlash(filepath.Clean(name))
	if !fs.ValidPath(name) {
		return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("objectstorage: %q must be a relative path that stays inside its directory", name)}
	}
	st, err := root.Stat(name)
	if err != nil {
		return nil, localError(name, err)
	}
	var files []localFile
	if !st.IsDir() {
		if !st.Mode().IsRegular() {
			return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("objectstorage: %q is not a regular file", name)}
		}
		object := u.Object
		if u.IsPrefix() {
			object += path.Base(name)
		}
		files = append(files, localFile{rel: name, object: object, size: st.Size()})
	} else {
		prefix := u.Object
		if prefix != "" && !strings.HasSuffix(prefix, "/") {
			prefix += "/"
		}
		if err := walk(ctx, root, name, "", func(rel string, size int64) error {
			if len(files) >= o.maxFiles() {
				return &fault.Error{Code: fault.Invalid, Data: map[string]any{"max_files": o.maxFiles()},
					Message: fmt.Sprintf("objectstorage: %q holds more than %d files (raise max_files)", name, o.maxFiles())}
			}
			files = append(files, localFile{rel: path.Join(name, rel), object: prefix + rel, size: size})
			return nil
		}); err != nil {
			return nil, err
		}
		if len(files) == 0 {
			return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("objectstorage: directory %q holds no files", name)}
		}
	}
	var total int64
	for i := range files {
		f := &files[i]
		if len(f.object) > MaxObjectNameBytes {
			return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("objectstorage: object name %q is longer than %d bytes", f.object, MaxObjectNameBytes)}
		}
		if f.object == "" {
			return nil, &fault.Error{Code: fault.Invalid, Message: "objectstorage: the URI names no object"}
		}
		if f.size > MaxObjectSize {
			return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("objectstorage: %q is larger than %d bytes, the largest single object", f.rel, int64(MaxObjectSize))}
		}
		total += f.size
		if o.MaxBytes > 0 && total > o.MaxBytes {
			return nil, &fault.Error{Code: fault.Invalid, Data: map[string]any{"max_bytes": o.MaxBytes},
				Message: fmt.Sprintf("objectstorage: the upload is larger than %d bytes (raise max_bytes)", o.MaxBytes)}
		}
		sum, err := hashFile(ctx, root, f.rel)
		if err != nil {
			return nil, err
		}
		f.md5 = sum
	}
	return files, nil
}

// walk calls fn for every regular file below dir (relative names, slash
// separated, sorted).
func walk(ctx context.Context, root *os.Root, dir, rel string, fn func(rel string, size int64) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	full := path.Join(dir, rel)
	d, err := root.Open(full)
	if err != nil {
		return localError(full, err)
	}
	entries, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return localError(full, err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	for _, e := range entries {
		r := path.Join(rel, e.Name())
		mode := e.Type()
		if mode&fs.ModeSymlink != 0 {
			st, err := root.Stat(path.Join(dir, r)) // follows the link, inside root only
			if err != nil {
				return localError(path.Join(dir, r), err)
			}
			if st.IsDir() {
				return &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("objectstorage: %q is a symbolic link to a directory; it is not followed", path.Join(dir, r))}
			}
			mode = st.Mode().Type()
		}
		switch {
		case mode.IsDir():
			if err := walk(ctx, root, dir, r, fn); err != nil {
				return err
			}
		case mode.IsRegular():
			st, err := root.Stat(path.Join(dir, r))
			if err != nil {
				return localError(path.Join(dir, r), err)
			}
			if err := fn(r, st.Size()); err != nil {
				return err
			}
		}
	}
	return nil
}

func localError(name string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("objectstorage: %q does not exist", name), Err: err}
	case strings.Contains(err.Error(), "escapes"):
		return &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("objectstorage: refusing %q: it leads outside the directory", name), Err: err}
	}
	return &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("objectstorage: reading %q", name), Err: err}
}

func hashFile(ctx context.Context, root *os.Root, name string) (string, error) {
	f, err := root.Open(name)
	if err != nil {
		return "", localError(name, err)
	}
	defer f.Close()
	h := md5.New()
	if _, err := io.Copy(h, ctxReader{ctx, f}); err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", localError(name, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// put sends one file and checks the ETag the server answers.
func (c *Client) put(ctx context.Context, root *os.Root, u URI, f localFile) (string, error) {
	ct := mime.TypeByExtension(path.Ext(f.rel))
	if ct == "" {
		ct = "application/octet-stream"
	}
	req := request{
		method: http.MethodPut, u: u, object: f.object, size: f.size,
		header: http.Header{"Etag": {f.md5}, "Content-Type": {ct}},
		body: func() (io.ReadCloser, error) {
			fh, err := root.Open(f.rel)
			if err != nil {
				return nil, err
			}
			return readCloser{ctxReader{ctx, io.LimitReader(fh, f.size)}, fh}, nil
		},
	}
	resp, err := c.do(ctx, req, nil, nil)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	if got := strings.Trim(resp.Header.Get("ETag"), `"`); got != "" && !strings.EqualFold(got, f.md5) {
		return "", &fault.Error{Code: fault.Unavailable, Message: fmt.Sprintf("objectstorage: PUT %s: the server stored ETag %s, the file's MD5 is %s", objectAt(u, f.object), got, f.md5)}
	}
	return f.md5, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// ctxReader stops a copy when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r ctxReader) Read(b []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(b)
}

// Download saves uri into dir (created if missing). It is DownloadTo with
// a root at dir.
func (c *Client) Download(ctx context.Context, uri, dir string, o Options) (Result, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Result{}, &fault.Error{Code: fault.Invalid, Message: "objectstorage: create " + dir, Err: err}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Result{}, &fault.Error{Code: fault.Invalid, Message: "objectstorage: open " + dir, Err: err}
	}
	defer root.Close()
	return c.DownloadTo(ctx, uri, root, o)
}

// DownloadTo saves the object uri names into root under its base name, or
// every object below a prefix under its name relative to the prefix (in
// subdirectories, created 0700). Files are written 0600 through a
// temporary file renamed into place, never outside root. Object names that
// would leave root (.., absolute, empty segments) are refused before
// anything is written, as are existing files without Overwrite. Each
// object's MD5 is checked against its ETag; a mismatch is retried.
func (c *Client) DownloadTo(ctx context.Context, uri string, root *os.Root, o Options) (Result, error) {
	u, err := Parse(uri)
	if err != nil {
		return Result{}, &fault.Error{Code: fault.Invalid, Message: err.Error()}
	}
	type todo struct {
		object, local string
		size          int64
	}
	var list []todo
	if !u.IsPrefix() {
		info, found, err := c.Head(ctx, u)
		if err != nil {
			return Result{}, err
		}
		if !found {
			return Result{}, &fault.Error{Code: fault.NotFound, Data: map[string]any{"uri": u.String()},
				Message: fmt.Sprintf("objectstorage: %s does not exist (a prefix ends with /)", u)}
		}
		list = append(list, todo{u.Object, path.Base(u.Object), info.Bytes})
	} else {
		infos, err := c.List(ctx, u)
		if err != nil {
			return Result{}, err
		}
		for _, in := range infos {
			rel := strings.TrimPrefix(in.Name, u.Object)
			if strings.HasSuffix(rel, "/") && in.Bytes == 0 {
				continue // a directory marker
			}
			if !fs.ValidPath(rel) || strings.Contains(rel, `\`) {
				return Result{}, &fault.Error{Code: fault.Invalid, Data: map[string]any{"object": in.Name},
					Message: fmt.Sprintf("objectstorage: object %q cannot be saved: its name leaves the directory or has empty segments", in.Name)}
			}
			list = append(list, todo{in.Name, rel, in.Bytes})
		}
		if len(list) == 0 {
			return Result{}, &fault.Error{Code: fault.NotFound, Data: map[string]any{"uri": u.String()},
				Message: fmt.Sprintf("objectstorage: no objects below %s", u)}
		}
	}
	if len(list) > o.maxFiles() {
		return Result{}, &fault.Error{Code: fault.Invalid, Data: map[string]any{"max_files": o.maxFiles()},
			Message: fmt.Sprintf("objectstorage: %s holds %d objects, more than %d (raise max_files)", u, len(list), o.maxFiles())}
	}
	var total int64
	for _, t := range list {
		total += t.size
		if t.size > MaxObjectSize {
			return Result{}, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("objectstorage: %s is %d bytes, larger than a single object may be", objectAt(u, t.object), t.size)}
		}
		if !o.Overwrite {
			if _, err := root.Lstat(filepath.FromSlash(t.local)); err == nil {
				return Result{}, &fault.Error{Code: fault.Conflict, Data: map[string]any{"path": t.local},
					Message: fmt.Sprintf("objectstorage: %q already exists (set overwrite: true to replace it)", t.local)}
			}
		}
	}
	if o.MaxBytes > 0 && total > o.MaxBytes {
		return Result{}, &fault.Error{Code: fault.Invalid, Data: map[string]any{"max_bytes": o.MaxBytes},
			Message: fmt.Sprintf("objectstorage: %s holds %d bytes, more than %d (raise max_bytes)", u, total, o.MaxBytes)}
	}
	var res Result
	for _, t := range list {
		n, etag, err := c.get(ctx, root, objectAt(u, t.object), t.local, o.Overwrite)
		if err != nil {
			return res, err
		}
		res.Items = append(res.Items, Item{URI: objectAt(u, t.object).String(), Path: t.local, Bytes: n, ETag: etag})
		res.Bytes += n
	}
	return res, nil
}

// get downloads one object into local (below root). The download is read
// within the call's attempt, so a transfer cut short or failing its MD5
// check is sent again like any other unavailable answer.
func (c *Client) get(ctx context.Context, root *os.Root, u URI, local string, overwrite bool) (int64, string, error) {
	var n int64
	var sum string
	_, err := c.do(ctx, request{method: http.MethodGet, u: u, object: u.Object}, nil, func(resp *http.Response) error {
		defer resp.Body.Close()
		var err error
		n, sum, err = save(ctx, root, u, local, overwrite, resp)
		return err
	})
	if err != nil {
		return 0, "", err
	}
	return n, sum, nil
}

// save writes an answer's body into local, checking it against its ETag.
func save(ctx context.Context, root *os.Root, u URI, local string, overwrite bool, resp *http.Response) (int64, string, error) {
	etag := strings.Trim(resp.Header.Get("ETag"), `"`)
	// A large-object manifest's ETag is not the MD5 of its bytes.
	check := resp.Header.Get("X-Static-Large-Object") == "" && resp.Header.Get("X-Object-Manifest") == "" &&
		len(etag) == 32 && !strings.HasPrefix(resp.Header.Get("ETag"), `"`)
	h := md5.New()
	n, err := writeFile(root, filepath.FromSlash(local), ctxReader{ctx, io.LimitReader(resp.Body, MaxObjectSize+1)}, h, resp.ContentLength, overwrite, func() error {
		if check && !strings.EqualFold(hex.EncodeToString(h.Sum(nil)), etag) {
			return &fault.Error{Code: fault.Unavailable, Message: fmt.Sprintf("objectstorage: GET %s: the bytes received do not match the ETag %s", u, etag)}
		}
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return 0, "", ctx.Err()
		}
		var se *fault.Error
		if errors.As(err, &se) {
			return 0, "", err
		}
		return 0, "", &fault.Error{Code: fault.Unavailable, Message: fmt.Sprintf("objectstorage: GET %s: saving %q", u, local), Err: err}
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// writeFile writes r into name below root through a temporary file (0600)
// renamed into place once verify passes; parents are created 0700.
func writeFile(root *os.Root, name string, r io.Reader, h hash.Hash, want int64, overwrite bool, verify func() error) (int64, error) {
	if dir := filepath.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o700); err != nil {
			return 0, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("objectstorage: create directory %q", filepath.ToSlash(dir)), Err: err}
		}
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(filepath.Dir(name), "."+filepath.Base(name)+".tmp-"+hex.EncodeToString(rnd[:]))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("objectstorage: create %q", filepath.ToSlash(name)), Err: err}
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			_ = root.Remove(tmp)
		}
	}()
	n, err := io.Copy(io.MultiWriter(f, h), r)
	if err != nil {
		return n, err
	}
	if n > MaxObjectSize {
		return n, &fault.Error{Code: fault.Invalid, Message: "objectstorage: the object is larger than a single object may be"}
	}
	if want >= 0 && n != want {
		return n, fmt.Errorf("received %d of %d bytes", n, want)
	}
	if err := verify(); err != nil {
		return n, err
	}
	if err := f.Sync(); err != nil {
		return n, err
	}
	if err := f.Close(); err != nil {
		return n, err
	}
	if !overwrite {
		if _, err := root.Lstat(name); err == nil {
			_ = root.Remove(tmp)
			done = true
			return n, &fault.Error{Code: fault.Conflict, Message: fmt.Sprintf("objectstorage: %q already exists (set overwrite: true to replace it)", filepath.ToSlash(name))}
		}
	}
	if err := root.Rename(tmp, name); err != nil {
		return n, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("objectstorage: save %q", filepath.ToSlash(name)), Err: err}
	}
	done = true
	return n, nil
}
