//go:build !unix

package memtier

// mapBytes returns n bytes of heap memory: the platform maps none here.
func mapBytes(n int) []byte { return make([]byte, n) }

// unmapBytes leaves b to the garbage collector.
func unmapBytes([]byte) {}
