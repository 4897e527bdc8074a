package main

import "syscall"

// mountSmallTmpfs mounts a 5 MB tmpfs on dir (root or CAP_SYS_ADMIN).
func mountSmallTmpfs(dir string) (unmount func() error, err error) {
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=5m,mode=0700"); err != nil {
		return nil, err
	}
	return func() error { return syscall.Unmount(dir, 0) }, nil
}
