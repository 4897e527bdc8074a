package playtest

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
)

// Discover returns the test files under paths: a directory is walked for
// files ending in .test.yaml (skipping directories whose names start with
// "." and testdata); a file is taken as given. The result is sorted and
// without duplicates.
func Discover(paths []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, root := range paths {
		info, err := os.Stat(root)
		if err != nil {
			return nil, fmt.Errorf("find test files: %w", err)
		}
		if !info.IsDir() {
			add(root)
			continue
		}
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(d.Name(), Suffix) {
				add(p)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("find test files under %s: %w", root, err)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Selected lists the cases of files that filter selects (nil: every
// case), in file order then case order.
func Selected(files []*File, filter *regexp.Regexp) []Job {
	var jobs []Job
	for _, f := range files {
		for _, c := range f.Cases {
			if filter == nil || filter.MatchString(CaseName(f.Path, c)) {
				jobs = append(jobs, Job{File: f, Case: c})
			}
		}
	}
	return jobs
}

// Job is one case to run.
type Job struct {
	File *File
	Case *Case
}

// DefaultParallel is how many cases run at once by default: cases spend
// most of their time waiting on the simulated clock, so more than the
// CPUs keeps them busy.
func DefaultParallel() int { return max(4, 2*runtime.GOMAXPROCS(0)) }

// RunAll runs jobs, parallel at a time, and calls report with each result
// in the order of jobs as soon as it and every result before it are in
// (so the output reads in file order while cases run concurrently).
// It returns every result in that order.
func RunAll(ctx context.Context, jobs []Job, parallel int, o Options, report func(*Result)) []*Result {
	if parallel <= 0 {
		parallel = DefaultParallel()
	}
	results := make([]*Result, len(jobs))
	done := make([]chan struct{}, len(jobs))
	for i := range done {
		done[i] = make(chan struct{})
	}
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(done[i])
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				results[i] = &Result{File: j.File.Path, Playbook: j.File.Playbook, Case: j.Case,
					Failures: []Failure{{Pos: j.Case.Pos, Message: "not run: " + context.Cause(ctx).Error()}}}
				return
			}
			defer func() { <-sem }()
			results[i] = RunCase(ctx, j.File, j.Case, o)
		}()
	}
	for i := range jobs {
		<-done[i]
		if report != nil {
			report(results[i])
		}
	}
	wg.Wait()
	return results
}

// LoadAll loads every file; the invalid ones are returned with their
// errors (playbook.Diagnostics, or an I/O error).
func LoadAll(paths []string) (files []*File, invalid map[string]error) {
	invalid = map[string]error{}
	for _, p := range paths {
		f, err := Load(p)
		if err != nil {
			invalid[p] = err
			continue
		}
		files = append(files, f)
	}
	return files, invalid
}
