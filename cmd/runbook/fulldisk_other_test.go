//go:build !linux

package main

import "errors"

// mountSmallTmpfs: tmpfs is Linux's; elsewhere smallDisk limits the
// binary's file size instead.
func mountSmallTmpfs(string) (func() error, error) {
	return nil, errors.New("no tmpfs on this system")
}
