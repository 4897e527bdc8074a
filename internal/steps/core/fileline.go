package core

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

type fileLineParams struct {
	Path string `json:"path" required:"true" maxlen:"4096" desc:"the file; a relative path resolves against base. It must stay inside the playbook's directory, runbook's state directory or a directory of $RUNBOOK_FILE_ROOTS (colon separated), its symbolic links resolved, the file's own included"`
	Line string `json:"line" required:"true" maxlen:"65536" desc:"the line that must be present, without its newline"`
	Base string `json:"base" enum:"playbook,state" default:"playbook" desc:"what a relative path is relative to: the playbook's directory, or runbook's state directory ($XDG_STATE_HOME/runbook, else ~/.local/state/runbook)"`
}

func init() {
	steps.Register(steps.Define(steps.Def[fileLineParams]{
		Type: "file.line",
		Summary: "Make sure a line is present in a text file, as Ansible's lineinfile does: append it when no line " +
			"equals it, creating the file (mode 0600) and its directories (0700) when missing. The append is one " +
			"write, synced, under a lock other runbook processes honour; running it again changes nothing.",
		Example: map[string]any{"path": "suppression/numbers.txt", "line": "+821012345678"},
		Outputs: []steps.Output{
			{Name: "added", Type: "boolean", Description: "whether the line was appended (false: it was there)"},
			{Name: "path", Type: "string", Description: "the absolute path of the file"},
		},
		Check:      checkFileLine,
		Idempotent: true,
		Run:        runFileLine,
	}))
}

func checkFileLine(p *fileLineParams, dynamic map[string]bool) []fault.Problem {
	if !dynamic["line"] && strings.ContainsAny(p.Line, "\r\n") {
		return []fault.Problem{{Path: "line", Message: "must be one line (it holds a newline)"}}
	}
	return nil
}

func runFileLine(ctx context.Context, c *steps.Call, p *fileLineParams) (steps.Outputs, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if ps := checkFileLine(p, nil); len(ps) > 0 {
		return nil, fault.ProblemsError(c.StepID, ps)
	}
	file, err := lineFilePath(c.Dir, p.Path, p.Base)
	if err != nil {
		return nil, err
	}
	added, err := lineFiles.ensure(file, p.Line)
	if err != nil {
		return nil, err
	}
	return steps.Outputs{"added": added, "path": file.path()}, nil
}

// stateDir is runbook's own state directory, where a relative path with
// base: state lands.
func stateDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "runbook"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fault.Errorf(fault.Invalid, "base: state: no state directory: %v", err)
	}
	return filepath.Join(home, ".local", "state", "runbook"), nil
}

// lineTarget is a line file: rel, inside the allowed root root (with its
// links resolved). The append opens it through the root (os.Root), so no
// link put in its path after the check leads out of the root.
type lineTarget struct {
	root, rel string
}

func (t lineTarget) path() string { return filepath.Join(t.root, t.rel) }

// lineFilePath resolves path against base, creates its directory and
// checks that the real file lies inside an allowed root: its directory
// with every symbolic link resolved, and the file itself when it is a
// link (the append then opens where it leads).
func lineFilePath(playbookDir, path, base string) (lineTarget, error) {
	sd, err := stateDir()
	if err != nil {
		return lineTarget{}, err
	}
	if !filepath.IsAbs(path) {
		root := playbookDir
		if base == "state" {
			root = sd
		}
		path = filepath.Join(root, path)
	}
	path = filepath.Clean(path)
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return lineTarget{}, fault.Errorf(fault.Failed, "create the directory of %s: %v", path, err)
	}
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return lineTarget{}, fault.Errorf(fault.Failed, "resolve %s: %v", dir, err)
	}
	real, what := filepath.Join(realDir, filepath.Base(path)), path
	if fi, err := os.Lstat(real); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		target, err := filepath.EvalSymlinks(real)
		if err != nil {
			return lineTarget{}, fault.Errorf(fault.Failed, "resolve %s, a symbolic link: %v", path, err)
		}
		real, realDir, what = target, filepath.Dir(target), path+" (a link to "+target+")"
	}
	roots := []string{playbookDir, sd}
	for _, r := range filepath.SplitList(os.Getenv("RUNBOOK_FILE_ROOTS")) {
		if r != "" {
			roots = append(roots, r)
		}
	}
	for _, r := range roots {
		if r == "" {
			continue
		}
		if rr, err := filepath.EvalSymlinks(r); err == nil && within(realDir, rr) {
			rel, err := filepath.Rel(rr, real)
			if err != nil {
				return lineTarget{}, fault.Errorf(fault.Failed, "resolve %s: %v", path, err)
			}
			return lineTarget{root: rr, rel: rel}, nil
		}
	}
	return lineTarget{}, fault.Errorf(fault.Invalid, "path %s is outside the directories a step may write (the playbook's, %s, and $RUNBOOK_FILE_ROOTS)", what, sd)
}

func within(dir, root string) bool {
	rel, err := filepath.Rel(root, dir)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// lineFiles caches, per file, the lines it holds, so that a busy file is
// read once, not once per run: the cache is trusted while the file's size
// and modification time are the ones this process left.
var lineFiles = &lineCache{files: map[string]*lineFile{}}

// syncFile makes an append durable; tests count the calls.
var syncFile = (*os.File).Sync

type lineCache struct {
	mu    sync.Mutex
	files map[string]*lineFile
}

// lineFile is one file's cache and its group commit: the lines asked for
// while an append is being synced wait in queued, and the next writer
// appends them all in one write and one sync.
type lineFile struct {
	mu      sync.Mutex // held by the writer; guards lines, size, modTime, endsNL
	lines   map[string]bool
	size    int64
	modTime time.Time
	endsNL  bool // the file is empty or ends with a newline

	queue  sync.Mutex
	queued []*lineWant
}

// lineWant is one caller's line and, once done is closed, its answer.
type lineWant struct {
	line  string
	added bool
	err   error
	done  chan struct{}
}

func (c *lineCache) get(path string) *lineFile {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.files[path]
	if f == nil {
		f = &lineFile{}
		c.files[path] = f
	}
	return f
}

// ensure appends line to file unless a line of it equals it, and
// reports whether it appended. It returns once the line is synced: with
// the other lines asked for meanwhile, as bbolt's writer commits a group.
func (c *lineCache) ensure(file lineTarget, line string) (bool, error) {
	lf := c.get(file.path())
	w := &lineWant{line: line, done: make(chan struct{})}
	lf.queue.Lock()
	lf.queued = append(lf.queued, w)
	lf.queue.Unlock()
	lf.mu.Lock()
	defer lf.mu.Unlock()
	select {
	case <-w.done: // the writer before took it
		return w.added, w.err
	default:
	}
	lf.queue.Lock()
	group := lf.queued
	lf.queued = nil
	lf.queue.Unlock()
	added, err := lf.appendLines(file, group)
	for i, g := range group {
		g.added, g.err = added[i], err
		close(g.done)
	}
	return w.added, w.err
}

// appendLines appends, in one write and one sync, each line of group that
// no line of the file (nor one before it in group) equals, and reports
// which it appended. The caller holds lf.mu.
func (lf *lineFile) appendLines(file lineTarget, group []*lineWant) ([]bool, error) {
	added := make([]bool, len(group))
	path := file.path()
	// Through the root: a link put in the file's path since lineFilePath
	// checked it is followed only within the root (os.Root).
	root, err := os.OpenRoot(file.root)
	if err != nil {
		return added, fault.Errorf(fault.Failed, "open %s: %v", file.root, err)
	}
	defer root.Close()
	fh, err := root.OpenFile(file.rel, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return added, fault.Errorf(fault.Failed, "open %s: %v", path, err)
	}
	defer fh.Close()
	// Other processes (a `runbook run` beside serve) take the same lock.
	if err := syscall.Flock(int(fh.Fd()), syscall.LOCK_EX); err != nil {
		return added, fault.Errorf(fault.Failed, "lock %s: %v", path, err)
	}
	defer syscall.Flock(int(fh.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing releases it too
	fi, err := fh.Stat()
	if err != nil {
		return added, fault.Errorf(fault.Failed, "stat %s: %v", path, err)
	}
	if lf.lines == nil || fi.Size() != lf.size || !fi.ModTime().Equal(lf.modTime) {
		if err := lf.load(fh, fi.Size()); err != nil {
			return added, fault.Errorf(fault.Failed, "read %s: %v", path, err)
		}
	}
	var text strings.Builder
	if !lf.endsNL {
		text.WriteString("\n") // a torn last line (a crash mid-write) stays its own line
	}
	fresh := map[string]bool{}
	for i, g := range group {
		if lf.lines[g.line] || fresh[g.line] {
			continue
		}
		fresh[g.line], added[i] = true, true
		text.WriteString(g.line)
		text.WriteString("\n")
	}
	if len(fresh) == 0 {
		return added, nil
	}
	nothing := make([]bool, len(group))
	if _, err := fh.WriteString(text.String()); err != nil {
		lf.lines = nil
		return nothing, fault.Errorf(fault.Failed, "append to %s: %v", path, err)
	}
	if err := syncFile(fh); err != nil {
		lf.lines = nil
		return nothing, fault.Errorf(fault.Failed, "sync %s: %v", path, err)
	}
	after, err := fh.Stat()
	if err != nil {
		lf.lines = nil
		return nothing, fault.Errorf(fault.Failed, "stat %s: %v", path, err)
	}
	for l := range fresh {
		lf.lines[l] = true
	}
	lf.size, lf.modTime, lf.endsNL = after.Size(), after.ModTime(), true
	return added, nil
}

// load reads every line of the file into the cache.
func (lf *lineFile) load(fh *os.File, size int64) error {
	lf.lines, lf.endsNL = map[string]bool{}, true
	if _, err := fh.Seek(0, io.SeekStart); err != nil {
		return err
	}
	r := bufio.NewReaderSize(fh, 64<<10)
	var last []byte
	for {
		b, err := r.ReadBytes('\n')
		if len(b) > 0 {
			last = b
			lf.lines[string(bytes.TrimRight(b, "\r\n"))] = true
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
	}
	lf.endsNL = len(last) == 0 || last[len(last)-1] == '\n'
	fi, err := fh.Stat()
	if err != nil {
		return err
	}
	if fi.Size() != size {
		return fmt.Errorf("the file changed while read under the lock")
	}
	lf.size, lf.modTime = fi.Size(), fi.ModTime()
	return nil
}
