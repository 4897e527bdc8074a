//go:build !crashpoints || !unix

package notice

// crashpoint is a no-op in normal builds; see crashpoint_on.go.
func crashpoint(string) {}
