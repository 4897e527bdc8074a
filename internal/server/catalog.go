package server

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/playbook"
)

// catalog is the set of playbooks the server runs: every *.yaml and *.yml
// file of one directory. A reload that finds any problem keeps the set it
// had and records the problems, so a typo saved by an editor never stops
// schedules or webhooks; running runs keep the snapshot they started with
// whatever the catalog holds.
type catalog struct {
	dir string

	mu       sync.RWMutex
	set      []*playbook.Playbook // valid, sorted by name
	byName   map[string]*playbook.Playbook
	sig      string    // listing signature of the loaded set
	loadedAt time.Time // when set was loaded
	failed   *loadError
}

// loadError is every problem of a playbook directory: the diagnostics of
// each invalid file, duplicate names, an unreadable directory.
type loadError struct {
	At       time.Time `json:"at"`
	Problems []string  `json:"problems"`
	sig      string
}

func (e *loadError) Error() string {
	return fmt.Sprintf("%d problem(s) in the playbook directory:\n%s", len(e.Problems), strings.Join(e.Problems, "\n"))
}

// playbookFiles lists the playbook files of dir, sorted.
func playbookFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read playbook directory: %w", err)
	}
	var files []string
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") {
			continue
		}
		if ext := filepath.Ext(name); ext == ".yaml" || ext == ".yml" {
			files = append(files, filepath.Join(dir, name))
		}
	}
	return files, nil
}

// signature summarises the directory listing (names, sizes, mtimes) to
// notice changes cheaply.
func signature(dir string) (string, error) {
	files, err := playbookFiles(dir)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, f := range files {
		fi, err := os.Stat(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed meanwhile: the next look sees it
		}
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s\x00%d\x00%d\n", f, fi.Size(), fi.ModTime().UnixNano())
	}
	return b.String(), nil
}

// loadDir loads every playbook of dir. It returns the valid set sorted by
// name, or a loadError with every problem.
func loadDir(dir string) ([]*playbook.Playbook, string, error) {
	sig, err := signature(dir)
	if err != nil {
		return nil, "", &loadError{At: time.Now(), Problems: []string{err.Error()}}
	}
	files, _ := playbookFiles(dir)
	var set []*playbook.Playbook
	var problems []string
	seen := map[string]string{}
	for _, f := range files {
		pb, err := playbook.Load(f, playbook.LoadOptions{})
		if err != nil {
			problems = append(problems, strings.Split(strings.TrimRight(err.Error(), "\n"), "\n")...)
			continue
		}
		if prev, dup := seen[pb.Name]; dup {
			problems = append(problems, fmt.Sprintf("%s: name: playbook name %q is already used by %s", pb.Pos, pb.Name, prev))
			continue
		}
		seen[pb.Name] = f
		set = append(set, pb)
	}
	if len(problems) > 0 {
		return nil, sig, &loadError{At: time.Now(), Problems: problems, sig: sig}
	}
	slices.SortFunc(set, func(a, b *playbook.Playbook) int { return strings.Compare(a.Name, b.Name) })
	return set, sig, nil
}

func newCatalog(dir string) *catalog {
	return &catalog{dir: dir, byName: map[string]*playbook.Playbook{}}
}

// load (re)loads the directory. It reports whether the set changed; on
// error the set is kept.
func (c *catalog) load() (changed bool, err error) {
	set, sig, err := loadDir(c.dir)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		var le *loadError
		if errors.As(err, &le) {
			c.failed = le
		}
		return false, err
	}
	c.failed = nil
	if sig == c.sig {
		return false, nil
	}
	c.set, c.sig, c.loadedAt = set, sig, time.Now()
	c.byName = make(map[string]*playbook.Playbook, len(set))
	for _, pb := range set {
		c.byName[pb.Name] = pb
	}
	return true, nil
}

// stale reports whether the directory changed since the last load attempt.
func (c *catalog) stale() bool {
	sig, err := signature(c.dir)
	if err != nil {
		return true
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.failed != nil {
		return sig != c.failed.sig
	}
	return sig != c.sig
}

func (c *catalog) all() []*playbook.Playbook {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.set
}

func (c *catalog) get(name string) *playbook.Playbook {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.byName[name]
}

func (c *catalog) names() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]string, len(c.set))
	for i, pb := range c.set {
		out[i] = pb.Name
	}
	return out
}

// status is what the API shows about the last load.
func (c *catalog) status() (loadedAt time.Time, failed *loadError) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.loadedAt, c.failed
}
