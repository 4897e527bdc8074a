//go:build !unix

package engine

// processExists cannot tell on this platform: a process is taken to exist.
func processExists(int) bool { return true }
